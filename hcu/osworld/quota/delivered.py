"""What a quota delivered while it bound: a throttled pilot's counted tokens and model calls per minute, over the
minutes in which its requests waited on rate limits.

The quota bounds of wall.py divide the campaign's tokens by a rate, as if the campaign used all of it once the
quota binds. A campaign uses less than the rate the quota states: an attempt keeps its resource (gateway/pool.py)
and asks in bursts that grow over its steps, so a quota split over small resources idles on one while another
refuses; and a provider that charges the reserved output at arrival (Azure: the prompt plus `max_tokens`) lets
through fewer tokens than it states, counted as the forecast counts them (the tokens the answers report). A pilot
the quota throttled measured what it lets through on the same upstreams: the forecast takes the smaller of that and
the stated rate (forecast.py). Minutes in which nothing waited say nothing of the quota (the pilot was not asking
for all of it) and are left out; so is a pilot with fewer than THROTTLED_MINUTES of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

THROTTLED_MINUTES = 3
"""Throttled minutes a pilot needs before what it was delivered counts."""


@dataclass(frozen=True)
class Delivered:
    """What a pilot's quota delivered over its throttled minutes."""

    resources: frozenset[str]
    """The upstream resources its requests went to."""
    minutes: int
    tokens: int
    calls: int

    def per_minute(self, metric: str) -> float:
        """Tokens (`tpm`) or model calls (`rpm`) per throttled minute."""
        return (self.tokens if metric == "tpm" else self.calls) / self.minutes


@dataclass
class _Minute:
    tokens: int = 0
    calls: int = 0
    throttled: bool = False


@dataclass
class DeliveredMeter:
    """Adds a pilot's token-log rows, one minute of their end times at a time."""

    minutes: dict[int, _Minute] = field(default_factory=lambda: defaultdict(_Minute))
    resources: set[str] = field(default_factory=set)

    def add(self, time: float, resource: str | None, throttled: bool, tokens: int, calls: int) -> None:
        """One request that ended at `time` (Unix seconds) on `resource`: whether it waited on a rate limit or was
        refused for one, and the counted tokens and model calls it was served."""
        minute = self.minutes[int(time // 60)]
        minute.tokens += tokens
        minute.calls += calls
        minute.throttled |= throttled
        if resource is not None:
            self.resources.add(resource)

    def delivered(self) -> Delivered | None:
        """Over the minutes with a wait (None: fewer than THROTTLED_MINUTES of them)."""
        throttled = [minute for minute in self.minutes.values() if minute.throttled]
        if len(throttled) < THROTTLED_MINUTES:
            return None
        return Delivered(frozenset(self.resources), len(throttled), sum(m.tokens for m in throttled),
                         sum(m.calls for m in throttled))
