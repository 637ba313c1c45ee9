"""Forwarding one upstream SSE stream to the client, event by event.

The opening (preamble) is held back until the stream says something: a rate limit before that is retried
with nothing forwarded. Complete events go out as they complete, with any echo of the real credential
scrubbed (an event is never split, so neither is a credential inside it). Once the event that ends a
generation in success has been forwarded, the generation is `delivered`: a client that leaves after it has
still received a complete answer, and it is counted with its usage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from hcu.gateway.backoff import hint_from_headers
from hcu.gateway.provider import Signal
from hcu.gateway.sse import EventTooLarge, SseParser

if TYPE_CHECKING:
    from hcu.gateway.exchange import Exchange

log = logging.getLogger("hcu.gateway")
DECIDING = (Signal.CONTENT, Signal.SUCCESS, Signal.ERROR)
MAX_TAIL_BYTES = 1024 * 1024
"""An unfinished last event up to this size is forwarded as it came (SSE clients discard it anyway)."""


class ClientGone(Exception):
    """The client closed its connection while we were writing to it."""


class StreamRelay:
    def __init__(self, exchange: Exchange, up: aiohttp.ClientResponse) -> None:
        self.x, self.up = exchange, up
        self.watch = exchange.s.provider.watch(exchange.rest)
        self.parser = SseParser()
        self.response: web.StreamResponse | None = None
        self.delivered = False
        self.limited_late = False
        """A rate limit that came after content was forwarded: too late to resend, still a rate limit (it
        neither counts toward the five-failures rule nor reads as a failed generation)."""

    async def run(self) -> web.StreamResponse | None:
        """The forwarded stream, or None when it was rate-limited before anything was forwarded."""
        x, watch = self.x, self.watch
        held: list[bytes | bytearray] = []
        try:
            async for chunk in self.up.content.iter_any():
                events, ready = self.parser.feed(chunk)
                if self.response is not None:
                    for name, data in events:
                        self.limited_late |= watch.event(name, data) is Signal.RATE_LIMIT
                    if ready:
                        await self.write(ready)
                    continue
                decided = False
                for name, data in events:
                    signal = watch.event(name, data)
                    if decided:
                        self.limited_late |= signal is Signal.RATE_LIMIT
                        continue
                    if signal is Signal.RATE_LIMIT:  # nothing forwarded yet: retryable
                        hint = hint_from_headers(self.up.headers)
                        x.hint = hint if hint is not None else watch.retry_after_sec
                        x.last_error = None
                        return None
                    decided = signal in DECIDING
                if ready:
                    held.append(ready)
                if decided:
                    await self.start(b"".join(held))
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, asyncio.TimeoutError,
                EventTooLarge) as exc:
            log.warning("task %s: upstream stream broke (%s)", x.task, type(exc).__name__)
        tail = self.parser.rest()
        if len(tail) > MAX_TAIL_BYTES:
            tail = b""  # an event that never ended: not worth forwarding
        x.usage, x.response_id = watch.usage, watch.response_id
        if self.response is None:
            await self.start(b"".join([*held, tail]))
        elif tail:
            await self.write(tail)
        if watch.finish():
            x.outcome = "success"
        else:
            x.outcome = "rate_limited" if self.limited_late else "failed"
            if not watch.errored:
                end = x.s.provider.error_event(x.rest, "upstream_disconnected",
                                               "upstream stream ended before completing")
                await self.write(end)
        try:
            await self.response.write_eof()
        except ConnectionResetError as exc:
            raise ClientGone from exc
        return self.response

    async def start(self, first: bytes) -> None:
        x = self.x
        x.status = self.up.status
        self.response = web.StreamResponse(status=self.up.status, headers=x.response_headers(self.up.headers))
        try:
            await self.response.prepare(x.request)
        except ConnectionResetError as exc:
            raise ClientGone from exc
        await self.write(first)

    async def write(self, data: bytes | bytearray) -> None:
        assert self.response is not None
        x = self.x
        if x.ttfb is None:
            x.ttfb = time.monotonic() - x.started
        try:
            await self.response.write(x.scrub(data))
        except ConnectionResetError as exc:
            raise ClientGone from exc
        self.delivered = self.watch.succeeded and not self.watch.errored
