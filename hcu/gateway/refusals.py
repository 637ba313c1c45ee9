"""Free traffic, counted per task scope: what a guest sends at no cost to itself must cost the host's disk, the
restore and the gateway's CPU a bounded amount too.

Free traffic is every request that neither reached the upstream nor held a budget slot: a route outside the
allow-list (`refused_route`), a body the gateway will not read or forward (`invalid_request`), a generation past
the budget (`refused_budget`) or while the token log cannot be written (`refused_log`), a free call (token
counting, model listing) past its rate (`refused_rate`), a request its client abandoned before anything went
upstream (`free`, `disconnected`), and the answers of the gate below. Per scope and interval
(`refusal_interval_sec`, a minute):

- the first `refusal_rows_per_interval` get a token-log row each, as every request did before, so the first
  few of a misbehaving client show what it sent;
- the rest are only counted, into one aggregate row (outcome `refusals`: how many of which kind, first and last
  time) written when the interval ends;
- after `flood_refusals_per_interval` the scope floods: until its interval ends every request of it is answered
  429 with Retry-After before anything of it is read or forwarded (`refused_flood`);
- free calls past `free_calls_per_interval` are refused 429 (`refused_rate`) before their body is read.

Refusals no scope can be held to (a missing or wrong scope secret: the guest may have named a scope not its own;
a path without a scope) are counted per peer address instead, never written, and flood the same way.

Only the current interval of a scope is kept in a window (the sweep forgets it when it ends); what stays per
scope is its count of each kind, which `/healthz` reports and the aggregate rows restore after a restart.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import nlargest

from hcu.defaults import GatewayDefaults
from hcu.gateway.clock import Clock

log = logging.getLogger("hcu.gateway")

ROW_KINDS = frozenset({"refused_route", "invalid_request", "refused_budget", "refused_log", "refused_rate",
                       "free", "disconnected"})
"""Kinds of free traffic that may get a row of their own (the first few of an interval): each is an outcome."""
FLOOD = "refused_flood"
"""A request of a flooding scope, answered 429 unread: only ever counted into an aggregate row."""
CEILING = "refused_ceiling"
"""A request of a scope at its token-log ceiling: counted, never written (the scope may write no more)."""
NO_SECRET = "refused_secret"
"""A request without its scope's secret (per peer)."""
NO_SCOPE = "refused_scope"
"""A request whose path names no task scope (per peer)."""
SHOWN_IN_HEALTHZ = 10
"""Scopes and peers `/healthz` lists by name (those with the most refusals)."""


@dataclass(slots=True)
class Window:
    """One scope's (or peer's) free traffic in its current interval."""

    started: float
    """Monotonic time the interval began."""
    refusals: int = 0
    free_calls: int = 0
    """Free calls forwarded (or refused for their rate) in the interval."""
    kinds: Counter[str] = field(default_factory=Counter)
    """Refusals past the row allowance, by kind: the interval's aggregate row."""
    first: float = 0.0
    """Unix times of the first and last refusal in `kinds`."""
    last: float = 0.0
    status: int = 0
    """Status and path of the last refusal in `kinds` (the aggregate row shows them)."""
    path: str = ""


class Refusals:
    """Per scope, the current interval's window and every refusal counted so far; per peer address, the same
    for refusals no scope can be held to. `write_aggregate(scope, window)` is told when a window with counted
    refusals ends."""

    def __init__(self, limits: GatewayDefaults, clock: Clock, write_aggregate: Callable[[str, Window], None]) -> None:
        self.limits, self.clock, self.write_aggregate = limits, clock, write_aggregate
        self.windows: dict[str, Window] = {}
        self.totals: dict[str, Counter[str]] = {}
        """Per scope, every refusal counted since the log began (restored from it at start)."""
        self.total: Counter[str] = Counter()
        """Every scope's refusals together, by kind."""
        self.peer_windows: dict[str, Window] = {}
        self.by_peer: dict[str, Counter[str]] = {}

    def count(self, task: str, kind: str, status: int, path: str) -> bool:
        """Count one refusal of `task`; True when it gets a row of its own, False when the interval's aggregate
        row takes it."""
        window = self._window(task)
        window.refusals += 1
        self._total(task)[kind] += 1
        self.total[kind] += 1
        limits = self.limits
        if kind in ROW_KINDS and window.refusals <= limits.refusal_rows_per_interval:
            return True
        if window.refusals == limits.refusal_rows_per_interval + 1:
            log.warning("task %s: more than %d refused requests in %g s; the rest of the interval's go into one "
                        "aggregate row", task, limits.refusal_rows_per_interval, limits.refusal_interval_sec)
        elif window.refusals == limits.flood_refusals_per_interval:
            log.warning("task %s: %d refused requests in %g s; its requests are answered 429 until the interval "
                        "ends", task, limits.flood_refusals_per_interval, limits.refusal_interval_sec)
        now = self.clock.time()
        if not window.kinds:
            window.first = now
        window.kinds[kind] += 1
        window.last, window.status, window.path = now, status, path
        return False

    def is_quiet(self, task: str) -> bool:
        """True while the scope's refusals in its interval still get rows (and log lines) of their own."""
        window = self.windows.get(task)
        return window is None or self._ended(window) or window.refusals < self.limits.refusal_rows_per_interval

    def peer_is_quiet(self, peer: str) -> bool:
        """The same for a peer, its latest refusal counted."""
        window = self.peer_windows.get(peer)
        return window is None or window.refusals <= self.limits.refusal_rows_per_interval

    def count_ceiling(self, task: str) -> None:
        self._total(task)[CEILING] += 1
        self.total[CEILING] += 1

    def flooding(self, task: str) -> float | None:
        """Seconds left of the scope's interval while it floods (its requests are answered 429 unread); None
        when it does not."""
        return self._flood_left(self.windows.get(task))

    def take_free_call(self, task: str) -> float | None:
        """Count a free call of `task`: None when it may go upstream, else the seconds left of the interval
        (the call is refused for its rate)."""
        window = self._window(task)
        window.free_calls += 1
        if window.free_calls <= self.limits.free_calls_per_interval:
            return None
        return max(window.started + self.limits.refusal_interval_sec - self.clock.monotonic(), 0.0)

    def refuse_peer(self, peer: str, kind: str) -> float | None:
        """Count a refusal no scope can be held to; the seconds left of the peer's interval when it floods."""
        self.by_peer.setdefault(peer, Counter())[kind] += 1
        window = self.peer_windows.get(peer)
        if window is None or self._ended(window):
            window = self.peer_windows[peer] = Window(self.clock.monotonic())
        left = self._flood_left(window)
        window.refusals += 1
        return left

    def sweep(self) -> None:
        """End every interval that is over: its aggregate row is written and its window forgotten."""
        for key in [key for key, window in self.peer_windows.items() if self._ended(window)]:
            del self.peer_windows[key]
        for key in [key for key, window in self.windows.items() if self._ended(window)]:
            self._end(key, self.windows.pop(key))

    def close(self) -> None:
        """At shutdown: write the aggregate of every interval still open."""
        windows, self.windows = self.windows, {}
        for key, window in windows.items():
            self._end(key, window)

    def restore(self, totals: dict[str, Counter[str]]) -> None:
        self.totals.update(totals)
        for counts in totals.values():
            self.total.update(counts)

    def view(self, task: str) -> dict[str, object]:
        """The scope's part of `/healthz?task=`."""
        return {"refusals": dict(self.totals.get(task, {})), "flooding": self.flooding(task) is not None}

    def status(self) -> dict[str, object]:
        """The refusals part of the host's `/healthz`."""
        flooding = [task for task, window in self.windows.items() if self._flood_left(window) is not None]
        return {
            "interval_sec": self.limits.refusal_interval_sec,
            "total": dict(self.total),
            "scopes": len(self.totals),
            "top_scopes": _largest(self.totals),
            "flooding": len(flooding),
            "flooding_scopes": sorted(flooding)[:SHOWN_IN_HEALTHZ],
            "by_peer": _largest(self.by_peer),
        }

    def _window(self, task: str) -> Window:
        window = self.windows.get(task)
        if window is not None and not self._ended(window):
            return window
        if window is not None:
            self._end(task, window)
        window = self.windows[task] = Window(self.clock.monotonic())
        return window

    def _ended(self, window: Window) -> bool:
        return self.clock.monotonic() - window.started >= self.limits.refusal_interval_sec

    def _end(self, task: str, window: Window) -> None:
        if window.kinds:
            self.write_aggregate(task, window)

    def _flood_left(self, window: Window | None) -> float | None:
        if window is None or window.refusals < self.limits.flood_refusals_per_interval:
            return None
        left = window.started + self.limits.refusal_interval_sec - self.clock.monotonic()
        return left if left > 0 else None

    def _total(self, task: str) -> Counter[str]:
        counts = self.totals.get(task)
        if counts is None:
            counts = self.totals[task] = Counter()
        return counts


def _largest(counts: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    """The few keys with the most refusals, with their counts by kind."""
    ranked = nlargest(SHOWN_IN_HEALTHZ, counts.items(), key=lambda item: sum(item[1].values()))
    return {key: dict(kinds) for key, kinds in ranked}
