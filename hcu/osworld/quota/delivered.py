"""What a quota delivered while it bound: a throttled pilot's counted tokens and model calls per minute on each
upstream resource, over the minutes in which that resource's requests waited on rate limits, summed over them.

The quota bounds of wall.py divide the campaign's tokens by a rate, as if the campaign used all of it once the
quota binds. A campaign gets less than the rate a quota states: attempts ask in bursts that grow over their steps
and wait out a refusal's whole retry-after, and a provider that charges the reserved output at arrival (Azure: the
prompt plus `max_tokens`) lets through fewer tokens than it states, counted as the forecast counts them (the tokens
the answers report). A pilot the quota throttled measured what each resource lets through: the forecast takes the
smaller of that and the stated rate, for the limit that bound the pilot (forecast.py).

Per resource, because an attempt keeps its resource (gateway/pool.py): as a pilot drains, one resource still
refuses its last attempts while another idles, minutes a campaign that keeps every resource busy does not have.
Minutes in which nothing on a resource waited say nothing of its quota and are left out; a pilot with a resource
throttled fewer than THROTTLED_MINUTES minutes says nothing of the whole.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

THROTTLED_MINUTES = 3
"""Throttled minutes each of a pilot's resources needs before what the quota delivered to it counts."""


@dataclass(frozen=True)
class ResourceDelivered:
    """What one resource delivered over its throttled minutes."""

    minutes: int
    tokens: int
    calls: int


@dataclass(frozen=True)
class Delivered:
    """What a pilot's quota delivered, per upstream resource."""

    by_resource: dict[str, ResourceDelivered]

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(self.by_resource)

    @property
    def minutes(self) -> int:
        """Throttled minutes, summed over the resources."""
        return sum(r.minutes for r in self.by_resource.values())


def per_minute(delivered: list[Delivered], metric: str) -> float:
    """Tokens (`tpm`) or model calls (`rpm`) a minute the quota delivered to these pilots (on the same resources):
    per resource, its total over its throttled minutes; summed over the resources."""
    total = 0.0
    for resource in delivered[0].by_resource:
        parts = [d.by_resource[resource] for d in delivered]
        counted = sum(p.tokens if metric == "tpm" else p.calls for p in parts)
        total += counted / sum(p.minutes for p in parts)
    return total


@dataclass
class _Minute:
    tokens: int = 0
    calls: int = 0
    throttled: bool = False


@dataclass
class DeliveredMeter:
    """Adds a pilot's token-log rows, per resource and minute of their end times."""

    minutes: dict[tuple[str, int], _Minute] = field(default_factory=lambda: defaultdict(_Minute))

    def add(self, time: float, resource: str | None, throttled: bool, tokens: int, calls: int) -> None:
        """One request that ended at `time` (Unix seconds) on `resource` (None: it reached none): whether it waited
        on a rate limit or was refused for one, and the counted tokens and model calls it was served."""
        if resource is None:
            return
        minute = self.minutes[(resource, int(time // 60))]
        minute.tokens += tokens
        minute.calls += calls
        minute.throttled |= throttled

    def delivered(self) -> Delivered | None:
        """Over each resource's minutes with a wait (None: a resource had fewer than THROTTLED_MINUTES of them)."""
        throttled: dict[str, list[_Minute]] = {resource: [] for resource, _ in self.minutes}
        for (resource, _), minute in self.minutes.items():
            if minute.throttled:
                throttled[resource].append(minute)
        if not throttled or any(len(minutes) < THROTTLED_MINUTES for minutes in throttled.values()):
            return None
        return Delivered({resource: ResourceDelivered(len(minutes), sum(m.tokens for m in minutes),
                                                      sum(m.calls for m in minutes))
                          for resource, minutes in sorted(throttled.items())})
