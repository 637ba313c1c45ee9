"""A client's request body: read once within a size limit and an idle timeout, forwarded as received.

The server does not decompress (aiohttp's auto_decompress is off), so a gzip body goes upstream with its
`Content-Encoding` intact. The gateway still has to see the JSON (model, `background`, server-side state), so
a gzip or deflate body is inflated for inspection only, and never past the same limit: a small bomb costs at
most `limit` bytes, then it is refused. Encodings the gateway cannot inspect are refused.

Memory: the body is read into one buffer sized by Content-Length (no second copy when it completes), and the
parsed JSON lives only while the few fields the gateway needs are taken from it.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass

import orjson
from aiohttp import web

MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body, compressed or inflated: a screenshot-heavy request fits."""
BODY_IDLE_TIMEOUT_SEC = 30.0
"""Longest pause while a client sends its body."""
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_INFLATE_STEP = 1024 * 1024


class BodyError(Exception):
    """A body the gateway refuses; `status` and `code` go into the provider-shaped error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class RequestBody:
    raw: bytes | bytearray
    """What the client sent, byte for byte (compressed if it was)."""
    encoding: str | None
    """The client's Content-Encoding, None for identity."""

    def json_bytes(self, limit: int = MAX_BODY_BYTES) -> bytes | bytearray:
        """The body as JSON text: the raw bytes, or inflated from gzip/deflate within `limit`."""
        if self.encoding is None:
            return self.raw
        return inflate(self.raw, self.encoding, limit)

    def parse(self, limit: int = MAX_BODY_BYTES) -> object:
        """The parsed JSON (None for an empty body); BodyError when it is not JSON."""
        text = self.json_bytes(limit)
        if not text:
            return None
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise BodyError(400, "invalid_request_error", "request body is not valid JSON") from None


def inflate(data: bytes | bytearray, encoding: str, limit: int) -> bytes:
    inflater = zlib.decompressobj(_WBITS[encoding])
    out = bytearray()
    try:
        pending = inflater.decompress(data, _INFLATE_STEP)
        while pending:
            out += pending
            if len(out) > limit:
                raise BodyError(413, "request_too_large", f"request body inflates past {limit} bytes")
            pending = inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP)
    except zlib.error:
        raise BodyError(400, "invalid_request_error", f"request body is not valid {encoding} data") from None
    return bytes(out)


async def read_body(request: web.Request, limit: int = MAX_BODY_BYTES) -> RequestBody:
    """Read the whole body; BodyError (413, 415) before reading more than `limit` bytes."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower() or None
    if encoding == "identity":
        encoding = None
    if encoding is not None and encoding not in _WBITS:
        raise BodyError(415, "unsupported_content_encoding",
                        f"Content-Encoding {encoding!r} is not accepted (send identity, gzip or deflate)")
    size = request.content_length
    if size is not None and size > limit:
        raise BodyError(413, "request_too_large", f"request body of {size} bytes is larger than {limit}")
    buf = bytearray(size) if size else bytearray()
    filled = 0
    content = request.content
    while True:
        chunk = content.read_nowait()  # what already arrived: a small body needs no wait (and no timer task)
        if not chunk and not content.at_eof():
            try:
                chunk = await asyncio.wait_for(content.readany(), BODY_IDLE_TIMEOUT_SEC)
            except asyncio.TimeoutError:
                raise BodyError(408, "request_timeout", "the client stopped sending its request body") from None
        if not chunk:
            break
        end = filled + len(chunk)
        if end > limit or (size is not None and end > size):
            raise BodyError(413, "request_too_large", f"request body is larger than {limit} bytes")
        if size:
            buf[filled:end] = chunk
        else:
            buf += chunk
        filled = end
    if size is not None and filled < size:
        raise BodyError(400, "invalid_request_error", "request body ended before its Content-Length")
    return RequestBody(buf, encoding)
