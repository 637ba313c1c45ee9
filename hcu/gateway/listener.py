"""The gateway's listening sockets: bounded client connections.

aiohttp keeps an idle connection for 3630 s by default and has no separate header-read timeout, so silent
or slow clients would hold descriptors until the gateway can accept nothing. Here:

- aiohttp's keep-alive timer is `header_timeout_sec`. It starts when a connection opens and again after each
  response, and closes the connection if no complete request header has arrived by then: one bound for an
  idle keep-alive and for a header sent byte by byte.
- at most `max_connections_per_peer` open connections per peer address; further ones are closed at once,
  so one guest cannot take every descriptor.
- the server leaves request bodies as sent (`auto_decompress=False`): `hcu.gateway.request_body` decodes
  them itself, completely and within the body limit, and forwards what it decoded.
- a client that leaves does not cancel its handler (aiohttp's `handler_cancellation` is off): the exchange
  learns it through `on_client_lost` and decides itself what ends at once and what runs on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

from hcu.gateway.state import STATE

log = logging.getLogger("hcu.gateway")


class _PeerLimited(asyncio.Protocol):
    """Wraps aiohttp's per-connection protocol; counts the peer's open connections."""

    def __init__(self, inner: asyncio.Protocol, peers: Counter[str], limit: int) -> None:
        self.inner, self.peers, self.limit = inner, peers, limit
        self.peer: str | None = None
        self.on_lost: Callable[[], None] | None = None
        """Told first when the connection goes (the request being served now registers it)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        if self.peers[peer] >= self.limit:
            log.warning("peer %s already has %d open connections: closing a new one", peer, self.limit)
            transport.abort()
            return
        self.peer = peer
        self.peers[peer] += 1
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is None:
            return
        self.peers[self.peer] -= 1
        if not self.peers[self.peer]:
            del self.peers[self.peer]
        if self.on_lost is not None:
            self.on_lost()
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class PeerLimitedSite(web.BaseSite):
    """A TCP site whose connections go through `_PeerLimited`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, peers: Counter[str], limit: int) -> None:
        super().__init__(runner)
        self._host, self._port, self._peers, self._limit = host, port, peers, limit

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _PeerLimited(server(), self._peers, self._limit),  # type: ignore[arg-type]
            self._host, self._port, backlog=self._backlog, reuse_address=True,
        )


def on_client_lost(request: web.Request, callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` when the client's connection goes while `request` is served; returns the function that
    stops watching (call it when the request ends)."""
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    if not isinstance(protocol, _PeerLimited):
        return lambda: None
    protocol.on_lost = callback

    def stop() -> None:
        if protocol.on_lost is callback:
            protocol.on_lost = None

    return stop


async def serve(app: web.Application, host: str, ports: list[int]) -> web.AppRunner:
    """Start one listener per port on one shared app (one shared state, one count of connections per
    peer)."""
    state = app[STATE]
    kwargs: dict[str, Any] = {"keepalive_timeout": state.config.header_timeout_sec, "auto_decompress": False}
    runner = web.AppRunner(app, handler_cancellation=False, access_log=None, **kwargs)
    await runner.setup()
    peers: Counter[str] = Counter()
    for port in ports:
        await PeerLimitedSite(runner, host, port, peers, state.config.max_connections_per_peer).start()
    return runner
