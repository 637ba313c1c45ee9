"""Forwarding one upstream SSE stream to the client, event by event; what the stream came to is returned as a
`StreamResult` for the exchange to apply.

The opening (preamble) is held back until the stream says something: a rate limit before that is retried
with nothing forwarded. Complete events go out as they complete, with any echo of the real credential
scrubbed (an event is never split, so neither is a credential inside it). The verdict is the stream's first
terminal event (`StreamWatch.verdict`): a completed answer is a success whatever follows it.

A client that leaves (or stops reading for `client_write_timeout_sec`) does not end the relay: the upstream
is still generating, and bills, so the stream is read on (at most `drain_max_bytes` more; the exchange bounds
the time) until its verdict is known, and a completed generation is counted.

An upstream that cuts the stream, or stops sending, gets an error event after the last complete event: an
unfinished event is never forwarded, so the error always starts on an event boundary and an SSE client parses
it whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from hcu.gateway.provider import Signal, StreamWatch
from hcu.gateway.sse import EventTooLarge, SseParser
from hcu.gateway.tokenlog import Outcome

log = logging.getLogger("hcu.gateway")
DECIDING = (Signal.CONTENT, Signal.SUCCESS, Signal.ERROR)
TRANSPORT_HIGH_WATER = 64 * 1024
"""asyncio's default: a write can only wait for the reader once the transport holds more than this."""


class Client:
    """The client's side of one exchange: whether it is still there to write to."""

    def __init__(self, on_leave: Callable[[], None], *, drain: bool) -> None:
        self.gone = False
        self.drain = drain
        """Once gone, read the upstream on to learn the verdict (generations), or stop at once."""
        self._on_leave = on_leave

    def leave(self) -> None:
        if not self.gone:
            self.gone = True
            self._on_leave()


@dataclass
class StreamResult:
    response: web.StreamResponse | None
    """The stream as forwarded; None when it was rate-limited before anything was forwarded (resend it)."""
    outcome: Outcome
    status: int
    """HTTP status the client was sent (0 when nothing was sent)."""
    first_byte_at: float | None = None
    """When the first byte went to the client (`RelayIO.now`)."""


@dataclass(frozen=True)
class RelayIO:
    """What the relay needs of its exchange: the client's request, the answer's headers, the scrubber, the
    provider's error event and the limit on reading after the client left."""

    request: web.Request
    headers: dict[str, str]
    scrub: Callable[[bytes | bytearray], bytes | bytearray]
    error_event: Callable[[str, str], bytes]
    drain_max_bytes: int
    client_write_timeout_sec: float
    task: str
    now: Callable[[], float]
    """The exchange's monotonic clock."""


class StreamRelay:
    def __init__(self, up: aiohttp.ClientResponse, watch: StreamWatch, io: RelayIO, client: Client) -> None:
        self.up, self.watch, self.io, self.client = up, watch, io, client
        self.parser = SseParser()
        self.response: web.StreamResponse | None = None
        self.first_byte_at: float | None = None
        self.drained = 0
        """Bytes read from the upstream after the client left."""

    async def run(self) -> StreamResult:
        held: list[bytes | bytearray] = []
        try:
            async for chunk in self.up.content.iter_any():
                if self.client.gone:
                    self.drained += len(chunk)
                    if self.drained > self.io.drain_max_bytes:
                        log.warning("task %s: the client left; the upstream sent %d more bytes without finishing",
                                    self.io.task, self.drained)
                        break
                events, ready = self.parser.feed(chunk)
                signals = [self.watch.event(name, data) for name, data in events]
                if self.response is not None:
                    await self.write(ready)
                elif Signal.RATE_LIMIT in signals and _limited_before_deciding(signals) and not self.client.gone:
                    return StreamResult(None, "rate_limited", 0)  # nothing forwarded yet: resend
                else:
                    held.append(ready)
                    if any(map(DECIDING.__contains__, signals)):
                        await self.start(b"".join(held))
                if self.client.gone and (self.watch.verdict is not None or not self.client.drain):
                    break  # nothing more to learn, and nobody to forward it to
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, asyncio.TimeoutError,
                EventTooLarge) as exc:
            log.warning("task %s: upstream stream broke (%s)", self.io.task, type(exc).__name__)
        return await self.finish(held)

    async def finish(self, held: list[bytes | bytearray]) -> StreamResult:
        verdict = self.watch.verdict
        if self.response is None:
            await self.start(b"".join(held))
        if verdict is None:
            await self.write(self.io.error_event("upstream_disconnected", "upstream stream ended before completing"))
        if not self.client.gone:
            try:
                await self.response.write_eof()  # type: ignore[union-attr]
            except ConnectionError:
                self.client.leave()
        outcome: Outcome = (
            "success" if verdict is Signal.SUCCESS
            else "disconnected" if self.client.gone
            else "rate_limited" if verdict is Signal.RATE_LIMIT  # too late to resend, still a rate limit
            else "failed"
        )
        return StreamResult(self.response, outcome, self.up.status, self.first_byte_at)

    async def start(self, first: bytes) -> None:
        self.response = web.StreamResponse(status=self.up.status, headers=self.io.headers)
        if self.client.gone:
            return
        try:
            await self.response.prepare(self.io.request)
        except ConnectionError:
            self.client.leave()
            return
        await self.write(first)

    async def write(self, data: bytes | bytearray) -> None:
        if self.client.gone or not data:
            return
        assert self.response is not None
        if self.first_byte_at is None:
            self.first_byte_at = self.io.now()
        transport = self.io.request.transport
        stall = None
        if transport is not None and transport.get_write_buffer_size() + len(data) > TRANSPORT_HIGH_WATER:
            # this write may wait for the reader; one that stops reading is treated as gone past the timeout
            stall = asyncio.get_running_loop().call_later(self.io.client_write_timeout_sec, self._stalled, transport)
        try:
            await self.response.write(self.io.scrub(data))
        except ConnectionError:
            self.client.leave()
        finally:
            if stall is not None:
                stall.cancel()

    def _stalled(self, transport: asyncio.BaseTransport | None) -> None:
        log.warning("task %s: the client left the answer unread for %g s; treated as gone", self.io.task,
                    self.io.client_write_timeout_sec)
        self.client.leave()
        if transport is not None:
            transport.abort()  # wakes the write waiting on the client


def _limited_before_deciding(signals: list[Signal]) -> bool:
    """A rate limit came before anything that decides the stream (so nothing needs forwarding yet)."""
    for signal in signals:
        if signal is Signal.RATE_LIMIT:
            return True
        if signal in DECIDING:
            return False
    return False
