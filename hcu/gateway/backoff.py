"""How long to wait after a rate limit: the upstream's hint if it gave one, else capped exponential backoff
with jitter."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

BACKOFF_BASE_SEC = 1.0
BACKOFF_CAP_SEC = 60.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SEC = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """`1s`, `6m0s`, `250ms`, `1h2m3.5s` or a bare number of seconds -> seconds; None if unreadable."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SEC[u] for n, u in parts)


def _retry_after(value: str, now: float) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def hint_from_headers(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the upstream asks us to wait, from `retry-after-ms`, `retry-after` (seconds or an HTTP date,
    against Unix time `now`) or the later of `x-ratelimit-reset-requests`/`-tokens`; None when it gave no
    usable hint."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is not None and (sec := _retry_after(ra, time.time() if now is None else now)) is not None:
        return sec
    resets = [
        parse_duration(headers[h])
        for h in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if h in headers
    ]
    known = [r for r in resets if r is not None]
    return max(known) if known else None


def backoff_sec(attempt: int) -> float:
    """Exponential backoff for the `attempt`-th retry (1-based), capped at 60 s, with jitter over its upper
    half so that tasks rate-limited together do not come back together."""
    ceiling = min(BACKOFF_CAP_SEC, BACKOFF_BASE_SEC * 2 ** min(max(attempt - 1, 0), 16))
    return ceiling / 2 + random.uniform(0, ceiling / 2)
