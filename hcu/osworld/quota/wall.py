"""The campaign's wall time: bounded by the attempts' own length and by what the quota lets through.

Three bounds, each a total over the attempts to run with its 90% prediction interval (stats.py):

- `attempts`: the attempts' summed length over how many run at once (`max_active_tasks`, the ceiling under
  `"auto"`, or this host's memory, the smaller). An attempt's length is its duration less its rate-limit waits
  (profile.py): a pilot run on the campaign's quota, and often throttled by it, waited for that quota, which the
  next bounds count; left in the length, its waits would make the campaign longer twice.
- `tpm`: the tokens to spend over the quota's tokens per minute (or over what it delivered while it bound, when a
  run read was throttled on the same upstreams and was delivered less: delivered.py);
- `rpm`: the model calls over its requests per minute (the same).

The campaign takes at least each of them: its expected wall time is the largest expected value, its range the
largest low and the largest high (unknown where a bound has no range), and the forecast names the bound the
expected value took. Below what the quota serves the attempts' length binds, above it the quota; near it the two
are close and a campaign takes somewhat longer than either, as attempts bunch up on the quota (bench_quota.py
measures by how much).
"""

from __future__ import annotations

from pydantic import BaseModel

from hcu.osworld.quota.limits import Capacity
from hcu.osworld.quota.stats import Range

QUOTA_FIGURES = {"tpm": "tokens", "rpm": "model calls"}
"""What each kind of limit counts, in words."""


class WallBound(BaseModel):
    """One bound on the campaign's wall time."""

    of: str
    """What bounds it, e.g. "the attempts' length at 4 at once (max_active_tasks)", "tokens over the quota's
    rate (tpm of openai)"."""
    wall_time_sec: Range


def wall_bounds(length: Range, at_once: tuple[float, str], quota: dict[str, tuple[Range, Capacity | None]],
                observed: str) -> dict[str, WallBound]:
    """The bounds of the attempts to run from their summed `length` (durations less waits) at `at_once` (how
    many, and what sets it) and, per limit kind, the total it counts and the quota's capacity of it (`observed`:
    what the upstreams stated); only the bounds that are known."""
    attempts, why = at_once
    bounds = {"attempts": WallBound(of=f"the attempts' length at {attempts:g} at once ({why})",
                                    wall_time_sec=length.scaled(1 / attempts))}
    for metric, (total, cap) in quota.items():
        if cap is not None:
            bounds[metric] = WallBound(of=f"{QUOTA_FIGURES[metric]} over the quota's rate ({observed}{cap.of})",
                                       wall_time_sec=total.scaled(60 / cap.per_minute))
    return {key: bound for key, bound in bounds.items() if bound.wall_time_sec.expected is not None}


def wall_time(bounds: dict[str, WallBound]) -> tuple[Range, str | None]:
    """The wall time the bounds give, and the key of the bound its expected value took (None: none known)."""
    if not bounds:
        return Range(), None
    ranges = [bound.wall_time_sec for bound in bounds.values()]
    taken = max(bounds, key=lambda key: bounds[key].wall_time_sec.expected or 0.0)
    lows, highs = [r.low for r in ranges], [r.high for r in ranges]
    return Range(low=None if None in lows else max(low or 0.0 for low in lows),
                 expected=bounds[taken].wall_time_sec.expected,
                 high=None if None in highs else max(high or 0.0 for high in highs)), taken
