"""Time as the gateway reads it: one object, so tests drive waits and expiries without waiting."""

from __future__ import annotations

import asyncio
import time


class Clock:
    """The system's clocks; a test passes a subclass that moves time itself."""

    monotonic = staticmethod(time.monotonic)
    time = staticmethod(time.time)
    """Unix time (token-log rows, token expiry, HTTP-date hints)."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = Clock()
