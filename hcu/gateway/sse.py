"""Incremental server-sent-events parsing: bytes as they arrive in, complete (event, data) pairs out, together
with the bytes of those complete events (what the gateway forwards).

Each byte is scanned once: a chunk is searched from where the previous search stopped (less the 3 bytes a
split terminator can straddle), so one 16 MB event costs one pass, not one pass per chunk. Only what
classification needs is parsed; the forwarded bytes are the upstream's own.
"""

from __future__ import annotations

import re

from hcu.gateway.errors import GatewayProxyError

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\n\r\n")
MAX_EVENT_BYTES = 64 * 1024 * 1024
"""An upstream that never ends an event (or sends one larger than this) is treated as a broken stream."""


class EventTooLarge(GatewayProxyError):
    """The upstream sent more than MAX_EVENT_BYTES without ending an event."""


class SseParser:
    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        """Bytes of the buffer already searched for an event end without finding one."""
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> tuple[list[tuple[str | None, bytes]], bytearray]:
        """Events completed by `chunk`, each as (event name or None, data with lines joined by newline), and
        the bytes of those complete events (empty when none completed)."""
        buf = self._buffer
        buf += chunk
        events: list[tuple[str | None, bytes]] = []
        start = 0
        pos = max(0, self._scanned - 3)
        while (match := _EVENT_END.search(buf, pos)) is not None:
            parsed = _parse_event(buf[start : match.start()])
            if parsed is not None:
                events.append(parsed)
            start = pos = match.end()
        complete = buf[:start]
        if start:
            del buf[:start]
        self._scanned = len(buf)
        if self._scanned > self._max:
            raise EventTooLarge(f"an event grew past {self._max} bytes without ending")
        return events, complete

    def rest(self) -> bytes:
        """Bytes of an event the stream never finished (forwarded as they are at the end of the stream)."""
        rest, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
        return rest


def _parse_event(block: bytearray) -> tuple[str | None, bytes] | None:
    name: str | None = None
    data: list[bytearray] = []
    for line in block.splitlines():
        if line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
    if name is None and not data:
        return None  # comment or keep-alive
    return name, b"\n".join(data)
