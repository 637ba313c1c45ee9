"""A client's request body: read as it arrives, within a size limit, an idle timeout and a total deadline, and
decoded completely, so that what the gateway checks is byte for byte what goes upstream.

- Nothing is allocated from the announced Content-Length: a 64 MB announcement followed by silence costs
  nothing; one over the limit is answered 413 at once (and the connection closed, so nothing is read after it).
- A gzip or deflate body is decoded whole, every gzip member of it, within the same limit (a small bomb costs
  at most the limit, then it is refused), and the decoded bytes go upstream without a Content-Encoding: no
  reading of the body can differ between the gateway and the upstream. A member that does not end, or bytes
  after the last one, are refused; so is any other or any stacked encoding.
- Every body a peer address has in the gateway (being read, or held while it is forwarded and may be resent)
  counts against that peer's share, so one guest's connections together cannot take the gateway's memory.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter
from dataclasses import dataclass

from aiohttp import StreamReader, web

from hcu.gateway.refusal import Refused

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_DECODE_STEP = 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    idle_timeout_sec: float
    timeout_sec: float
    """Total deadline for the whole body, however it trickles in."""


class PeerBodies:
    """Bytes of request bodies each peer address has in the gateway now, against one share per peer."""

    def __init__(self, share: int) -> None:
        self.share = share
        self.held: Counter[str] = Counter()

    def hold(self, peer: str) -> BodyHold:
        return BodyHold(self, peer)


class BodyHold:
    """One request's part of its peer's share; `release()` gives it back (the exchange does, at its end)."""

    def __init__(self, bodies: PeerBodies, peer: str) -> None:
        self._bodies, self.peer, self.bytes = bodies, peer, 0

    def grow(self, size: int) -> None:
        held = self._bodies.held
        if held[self.peer] + size > self._bodies.share:
            raise Refused(503, "too_many_request_bodies", f"this client already has {held[self.peer]} bytes of "
                          "request bodies in the gateway; send fewer large requests at once", close=True)
        held[self.peer] += size
        self.bytes += size

    def shrink(self, size: int) -> None:
        size = min(size, self.bytes)
        self.bytes -= size
        held = self._bodies.held
        held[self.peer] -= size
        if held[self.peer] <= 0:
            del held[self.peer]

    def release(self) -> None:
        self.shrink(self.bytes)


def content_encoding(request: web.Request) -> str | None:
    """The one encoding the body is in (None for identity); 415 for anything else, stacked ones included."""
    tokens = [t.strip().lower() for value in request.headers.getall("Content-Encoding", []) for t in value.split(",")]
    tokens = [t for t in tokens if t and t != "identity"]
    if not tokens:
        return None
    if len(tokens) > 1 or tokens[0] not in _WBITS:
        raise Refused(415, "unsupported_content_encoding", f"Content-Encoding {', '.join(tokens)!r} is not "
                      "accepted (send identity, gzip or deflate)", close=True)
    return tokens[0]


async def read_body(request: web.Request, limits: BodyLimits, hold: BodyHold) -> bytearray:
    """The whole body, decoded; Refused (413, 415, 408, 400, 503) before reading or decoding past the limit."""
    encoding = content_encoding(request)
    size = request.content_length
    if size is not None and size > limits.max_bytes:
        raise Refused(413, "request_too_large", f"request body of {size} bytes is larger than {limits.max_bytes}",
                      close=True)
    raw = await _read(request.content, limits, hold, size)
    if encoding is None:
        return raw
    decoded = decode(raw, encoding, limits.max_bytes, hold)
    hold.shrink(len(raw))  # the compressed copy is dropped on return
    return decoded


async def _read(content: StreamReader, limits: BodyLimits, hold: BodyHold, size: int | None) -> bytearray:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.timeout_sec
    buf = bytearray()
    while True:
        chunk = content.read_nowait()  # what already arrived: a small body needs no wait (and no timer task)
        if not chunk and not content.at_eof():
            chunk = await _next_chunk(content, limits, deadline - loop.time())
        if not chunk:
            break
        if len(buf) + len(chunk) > limits.max_bytes or (size is not None and len(buf) + len(chunk) > size):
            raise Refused(413, "request_too_large", f"request body is larger than {limits.max_bytes} bytes",
                          close=True)
        hold.grow(len(chunk))
        buf += chunk
    if size is not None and len(buf) < size:
        raise Refused(400, "invalid_request_error", "request body ended before its Content-Length", close=True)
    return buf  # no copy: a 60 MB body is held once


async def _next_chunk(content: StreamReader, limits: BodyLimits, remaining_sec: float) -> bytes:
    if remaining_sec <= 0:
        raise _late(limits)
    try:
        return await asyncio.wait_for(content.readany(), min(limits.idle_timeout_sec, remaining_sec))
    except asyncio.TimeoutError:
        if remaining_sec <= limits.idle_timeout_sec:
            raise _late(limits) from None
        raise Refused(408, "request_timeout", "the client stopped sending its request body", close=True) from None


def _late(limits: BodyLimits) -> Refused:
    return Refused(408, "request_timeout", f"the client did not send its whole request body within "
                   f"{limits.timeout_sec:g} s", close=True)


def decode(raw: bytes | bytearray, encoding: str, limit: int, hold: BodyHold) -> bytearray:
    """`raw` decoded: every gzip member in turn (deflate is one zlib stream); Refused past `limit`, for a
    stream that does not end, and for anything after the last member."""
    out = bytearray()
    rest = raw
    while True:
        inflater = zlib.decompressobj(_WBITS[encoding])
        pending = rest
        try:
            while not inflater.eof:
                piece = inflater.decompress(pending, _DECODE_STEP)  # empty input still flushes held output
                if not piece and not pending:
                    break
                if len(out) + len(piece) > limit:
                    raise Refused(413, "request_too_large", f"request body decodes past {limit} bytes", close=True)
                hold.grow(len(piece))
                out += piece
                pending = inflater.unconsumed_tail
        except zlib.error:
            raise Refused(400, "invalid_request_error", f"request body is not valid {encoding} data") from None
        if not inflater.eof:
            raise Refused(400, "invalid_request_error", f"request body: the {encoding} data does not end")
        rest = inflater.unused_data
        if not rest:
            return out
        if encoding == "deflate" or not rest.startswith(_GZIP_MAGIC):
            raise Refused(400, "invalid_request_error", f"request body: bytes after the end of its {encoding} data")
