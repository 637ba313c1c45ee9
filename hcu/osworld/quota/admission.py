"""Admission that follows the quota: how many attempts may run at once under `"max_active_tasks": "auto"`.

An additive increase and a decrease to what the signal says the quota served, over a measured signal: the share of
the running attempts' agent-phase time spent waiting on rate limits in a recent window (the gateways' cumulative
waits per scope, differenced between readings; a wait in progress counts up to the reading), and the upstreams'
headroom (at each reading the largest share of its limits an upstream had left, averaged over the window). With
`rule` the parameters (`hcu.defaults.ADMISSION`):

- **lower on a rate-limited attempt**: an attempt that ended `upstream_rate_limit` (its turn still ended on a rate
  limit after the runner's resumes), launched after the last lowering, multiplies the limit by
  `rate_limited_factor`;
- **lower on waits**: more than `lower_above` of the agent time waited, over at least `lower_hold_sec` since the
  limit took effect (after a lowering, once no more attempts run than it allows: the attempts already running
  finish first, and their waits do not lower it again), while the upstreams' headroom averaged below
  `lower_headroom` (or is unknown), lowers it to what the quota served: n attempts that waited a share w got about
  n (1 - w) attempts' demand served, over 1 - `raise_below` (the waits a raise accepts), at most down to
  `lower_factor` of it. Waits while an upstream still has room are single attempts outrunning their own
  deployment (an attempt keeps its resource), which fewer attempts would not shorten;
- **raise**: less than `raise_below` waited over the window, at least `raise_hold_sec` since the last change, the
  limit actually reached (as many attempts running as it allows, those in their agent phase averaging at least
  `busy_share` of it over the window, and fewer than the executor's slots: no growth while memory, node slots or
  an empty queue keep the count below it) and, where the gateways saw the upstreams' limit headers, a headroom of
  at least `min_headroom` (new attempts go to the upstream with the most) adds `raise_fraction` of the limit, at
  least one.

Never below 1, never above the ceiling; a lowering always removes at least one. The measurement never reaches back
before the limit took effect, so each decision reads the limit it judges. Nothing here stops an attempt: the queue only
holds new launches. The caller passes the time (its clock) and the readings (its gateways): tests inject both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from hcu.defaults import AdmissionDefaults


@dataclass(frozen=True)
class Reading:
    """What the run's gateways report at one moment."""

    waits: Mapping[str, float]
    """Cumulative rate-limit wait seconds per scope (a scope absent has not waited)."""
    headroom: float | None = None
    """The largest share of its limit an upstream had left in its answers (None: no upstream states one)."""


@dataclass(frozen=True)
class WindowStats:
    """The signal over the window since the last change (at most `window_sec`)."""

    span_sec: float
    """Time covered by consecutive readings."""
    agent_sec: float
    """Agent-phase attempt time in it."""
    wait_sec: float
    headroom: float | None

    @property
    def wait_share(self) -> float | None:
        return self.wait_sec / self.agent_sec if self.agent_sec > 0 else None

    def busy(self, limit: int) -> float:
        """The attempts in their agent phase, on average, as a share of `limit`."""
        return self.agent_sec / (self.span_sec * limit) if self.span_sec > 0 else 0.0


@dataclass(frozen=True)
class LimitChange:
    limit: int
    previous: int | None
    """None: the first limit of the run."""
    signal: str
    """What moved it: rate_limited, waits or no_waits."""
    reason: str
    """In words, with the figures."""
    stats: WindowStats | None = None
    """The signal it was decided on (None: not decided on one: the start)."""


@dataclass(frozen=True)
class _Sample:
    at: float
    demanding: frozenset[str]
    waits: Mapping[str, float]


@dataclass(frozen=True)
class _Span:
    """Between two readings."""

    start: float
    end: float
    agent_sec: float
    wait_sec: float
    headroom: float | None


@dataclass
class Controller:
    rule: AdmissionDefaults
    ceiling: int
    limit: int
    changed_at: float
    """When the limit last changed (or was set at the queue's start)."""
    effective_at: float | None = None
    """When it took effect: at once for a raise, for a lowering once no more attempts ran than it allows (None:
    not yet)."""
    lowered_at: float = -math.inf
    """When it was last lowered: a rate-limited attempt launched before that is already answered."""
    spans: deque[_Span] = field(default_factory=deque)
    last: _Sample | None = None
    rate_limited_pending: bool = False
    """An attempt that counts ended on a rate limit, not yet answered."""

    def __post_init__(self) -> None:
        self.limit = max(1, min(self.ceiling, self.limit))
        self.effective_at = self.changed_at

    def rate_limited(self, launched_at: float | None) -> None:
        """An attempt ended `upstream_rate_limit` (launched at `launched_at`, None when unknown); the next
        `observe` answers it."""
        if launched_at is None or launched_at >= self.lowered_at:
            self.rate_limited_pending = True

    def observe(self, at: float, running: int, demanding: Collection[str], reading: Reading | None,
                slots: int | None = None) -> LimitChange | None:
        """Take a reading (None: the gateways could not be read) with `running` attempts, those of `demanding` (their
        scopes) in their agent phase, and `slots` the executor has now (None: unbounded); the change it makes, if
        any."""
        if reading is not None:
            self._add(at, frozenset(demanding), reading)
        if self.effective_at is None and running <= self.limit:
            self.effective_at = at
        stats = self.window(at)
        if self.rate_limited_pending:
            self.rate_limited_pending = False
            return self._lower(at, self.rule.rate_limited_factor, "rate_limited",
                               "an attempt ended upstream_rate_limit (its turn still rate-limited after the resumes)",
                               stats)
        if self.effective_at is None or stats.wait_share is None:
            return None
        share, since = stats.wait_share, at - self.effective_at
        crowded = stats.headroom is None or stats.headroom < self.rule.lower_headroom
        if (share > self.rule.lower_above and crowded and since >= self.rule.lower_hold_sec
                and stats.span_sec >= self.rule.lower_hold_sec / 2):
            served = self.limit * (1 - share) / (1 - self.rule.raise_below)
            room = "" if stats.headroom is None else f", {stats.headroom:.0%} of the upstreams' limits left"
            return self._lower(at, max(self.rule.lower_factor, served / self.limit), "waits",
                               f"{share:.1%} of agent time waited on rate limits over {stats.span_sec:.0f} s "
                               f"(above {self.rule.lower_above:.0%}{room}): the quota served about "
                               f"{served:.1f} attempts' demand", stats)
        enough = stats.span_sec >= min(self.rule.window_sec, since) / 2
        roomy = stats.headroom is None or stats.headroom >= self.rule.min_headroom
        if (share < self.rule.raise_below and since >= self.rule.raise_hold_sec and enough and roomy
                and running >= self.limit and stats.busy(self.limit) >= self.rule.busy_share
                and self.limit < min(self.ceiling, self.ceiling if slots is None else slots)):
            room = "" if stats.headroom is None else f", {stats.headroom:.0%} of the upstreams' limits left"
            new = min(self.ceiling, self.limit + max(1, math.floor(self.limit * self.rule.raise_fraction)))
            return self._change(at, new, "no_waits", f"{share:.1%} of agent time waited on rate limits over "
                                f"{stats.span_sec:.0f} s with the limit reached{room}", stats)
        return None

    def window(self, at: float) -> WindowStats:
        """The signal since the limit took effect, at most `window_sec` back (nothing while it has not)."""
        begin = at if self.effective_at is None else max(self.effective_at, at - self.rule.window_sec)
        spans = [span for span in self.spans if span.start >= begin]
        roomy = [(span.end - span.start, span.headroom) for span in spans if span.headroom is not None]
        length = sum(seconds for seconds, _ in roomy)
        headroom = sum(seconds * share for seconds, share in roomy) / length if length > 0 else None
        return WindowStats(span_sec=sum(span.end - span.start for span in spans),
                           agent_sec=sum(span.agent_sec for span in spans),
                           wait_sec=sum(span.wait_sec for span in spans), headroom=headroom)

    def _add(self, at: float, demanding: frozenset[str], reading: Reading) -> None:
        sample = _Sample(at, demanding, dict(reading.waits))
        last, self.last = self.last, sample
        if last is None or at <= last.at:
            return
        elapsed, both = at - last.at, last.demanding & demanding
        waited = sum(min(elapsed, max(0.0, sample.waits.get(scope, 0.0) - last.waits.get(scope, 0.0)))
                     for scope in both)  # a restarted gateway's counters may go back: never a negative wait
        self.spans.append(_Span(last.at, at, elapsed * len(both), waited, reading.headroom))
        while self.spans and self.spans[0].start < at - self.rule.window_sec:
            self.spans.popleft()

    def cap(self, at: float, ceiling: int) -> LimitChange | None:
        """A new ceiling (`ctl set auto_max_active_tasks`): a limit above it comes down to it at once."""
        self.ceiling = ceiling
        if self.limit <= ceiling:
            return None
        return self._change(at, ceiling, "ceiling", f"auto_max_active_tasks set to {ceiling}", self.window(at))

    def _lower(self, at: float, factor: float, signal: str, reason: str, stats: WindowStats) -> LimitChange | None:
        if self.limit <= 1:
            return None
        self.lowered_at = at
        return self._change(at, max(1, min(self.limit - 1, math.floor(self.limit * factor))), signal, reason, stats)

    def _change(self, at: float, new: int, signal: str, reason: str, stats: WindowStats) -> LimitChange:
        change = LimitChange(new, self.limit, signal, reason, stats)
        self.effective_at = at if new > self.limit else None
        self.limit, self.changed_at = new, at
        return change
