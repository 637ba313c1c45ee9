"""The admission rule (quota/admission.py) on a clock the test moves, with a scripted signal: attempts that wait
a set share of their time on rate limits, as the gateways' cumulative counters would report it. And the reading
of the gateways' reports (quota/gateway_reading.py)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from hcu.defaults import ADMISSION
from hcu.gateway.budget import ScopeWaits
from hcu.gateway.observed_limits import LimitSeen, ObservedLimits
from hcu.osworld.quota.admission import Controller, LimitChange, Reading
from hcu.osworld.quota.gateway_reading import GatewayReport, reading_of
from hcu.osworld.quota.limits import QuotaLimit

STEP = 5.0


class ScriptedSignal:
    """Readings every STEP seconds of attempts that each wait `share` of their time on rate limits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: dict[str, float] = defaultdict(float)

    def run(self, controller: Controller, seconds: float, running: int, share: float = 0.0, *,
            demanding: int | None = None, headroom: float | None = None, slots: int | None = None) -> list[LimitChange]:
        scopes = [f"r.t{i}.a1" for i in range(running if demanding is None else demanding)]
        changes = []
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now += STEP
            for scope in scopes:
                self.waits[scope] += STEP * share
            change = controller.observe(self.now, running, scopes, Reading(dict(self.waits), headroom), slots)
            if change is not None:
                changes.append(change)
        return changes


def controller(limit: int, ceiling: int = 10) -> Controller:
    return Controller(ADMISSION, ceiling, limit, changed_at=0.0)


def test_it_raises_while_the_limit_is_reached_without_waits_and_never_past_the_ceiling():
    rule, signal, c = ADMISSION, ScriptedSignal(), controller(2)
    assert signal.run(c, rule.raise_hold_sec - STEP, running=2) == [], "not before the hold"
    (first,) = signal.run(c, STEP, running=2)
    assert (first.limit, first.previous, first.signal) == (3, 2, "no_waits") and first.stats.wait_share == 0
    limits = [first.limit]
    for _ in range(12):  # each time with as many attempts as the limit allows
        limits += [change.limit for change in signal.run(c, rule.raise_hold_sec, running=c.limit)]
    assert limits == [3, 4, 5, 6, 7, 8, 9, 10], "at least one, up to the ceiling"
    large, limits = controller(12, ceiling=30), []
    for _ in range(12):
        limits += [change.limit for change in signal.run(large, rule.raise_hold_sec, running=large.limit)]
    assert limits == [13, 14, 16, 18, 20, 23, 26, 29, 30], "15% of the limit, rounded down, at least one"


def test_no_growth_while_the_limit_is_not_reached():
    signal = ScriptedSignal()
    below = controller(4)
    assert signal.run(below, 3600, running=3) == [], "fewer attempts than the limit allows"
    held_in_boot = controller(4)
    assert signal.run(held_in_boot, 3600, running=4, demanding=2) == [], \
        "attempts held before their agent phase (memory, node caps) demand no quota"
    no_slots = controller(4)
    assert signal.run(no_slots, 3600, running=4, slots=4) == [], "the executor has no slot for one more"
    crowded = controller(4)
    assert signal.run(crowded, 3600, running=4, headroom=0.05) == [], "the upstreams' answers leave no headroom"
    assert [c.limit for c in signal.run(crowded, 3600, running=4, headroom=0.5)][:1] == [5]


def test_waits_lower_it_and_the_attempts_running_finish_before_it_is_judged_again():
    rule, signal, c = ADMISSION, ScriptedSignal(), controller(8)
    assert signal.run(c, rule.lower_hold_sec - STEP, running=8, share=0.3) == [], "not before the hold"
    (lowered,) = signal.run(c, STEP, running=8, share=0.3)
    assert (lowered.limit, lowered.signal) == (5, "waits") and lowered.stats.wait_share == pytest.approx(0.3)
    assert c.window(signal.now).span_sec == 0, "the measurement starts again at the change"
    assert signal.run(c, 1200, running=8, share=0.3) == [], "the eight already running are never stopped or counted"
    assert signal.run(c, rule.lower_hold_sec, running=5, share=0.3) == [], "held from when five run, not before"
    (again,) = signal.run(c, STEP, running=5, share=0.3)
    assert again.limit == 3
    assert signal.run(c, 600, running=3, share=0.05) == [], "between the thresholds it holds"


def test_a_rate_limited_attempt_halves_it_once_and_never_below_one():
    signal, c = ScriptedSignal(), controller(8)
    signal.run(c, 10, running=8)
    c.rate_limited(launched_at=1.0)
    (halved,) = signal.run(c, STEP, running=8)
    assert (halved.limit, halved.signal) == (4, "rate_limited")
    c.rate_limited(launched_at=2.0)  # launched before that lowering: already answered
    assert signal.run(c, STEP, running=8) == []
    for expected in (2, 1):
        c.rate_limited(launched_at=signal.now)
        assert [change.limit for change in signal.run(c, STEP, running=8)] == [expected]
    c.rate_limited(launched_at=signal.now)
    assert signal.run(c, STEP, running=8) == [] and c.limit == 1


def test_counters_that_go_back_never_count_as_waits():
    signal, c = ScriptedSignal(), controller(3)
    signal.run(c, 60, running=3, share=0.0)
    signal.waits.clear()  # a restarted gateway restores less than it had counted
    signal.run(c, 60, running=3, share=0.0)
    assert c.window(signal.now).wait_sec == 0
    assert Controller(ADMISSION, 4, 9, 0.0).limit == 4 and Controller(ADMISSION, 4, 0, 0.0).limit == 1, \
        "a start outside 1..ceiling is clamped"


def seen(at: float, tokens: tuple[int | None, int] | None = None, requests: tuple[int, int] | None = None):
    return ObservedLimits(tokens=LimitSeen(limit=tokens[0], remaining=tokens[1]) if tokens else None,
                          requests=LimitSeen(limit=requests[0], remaining=requests[1]) if requests else None,
                          seen_at=at)


def test_the_reading_merges_the_gateways_and_takes_the_roomiest_fresh_upstream():
    node_a = GatewayReport(rate_limit_waits={"r.a.a1": ScopeWaits(wait_sec=4.0, waits=1, waiting_now=0)},
                           upstream_limits={"h@d1": seen(90.0, (1000, 100), (60, 30)), "h@d2": None})
    node_b = GatewayReport(rate_limit_waits={"r.b.a1": ScopeWaits(wait_sec=2.5, waits=2, waiting_now=1)},
                           upstream_limits={"h@d1": seen(95.0, (1000, 400)), "h@d2": seen(10.0, (1000, 900))})
    reading = reading_of([node_a, node_b], now=100.0, max_age_sec=60.0)
    assert reading.waits == {"r.a.a1": 4.0, "r.b.a1": 2.5}
    assert reading.headroom == pytest.approx(0.4), "d1's freshest answer; d2's is too old to count"
    azure = GatewayReport(upstream_limits={"h@d1": seen(95.0, (None, 15000))})  # Azure: remaining tokens only
    assert reading_of([azure], 100.0, 60.0).headroom is None
    assert reading_of([azure], 100.0, 60.0, {"h@d1": QuotaLimit(tpm=60000)}).headroom == pytest.approx(0.25), \
        "the config's quota stands for the limit the header leaves out"
    assert reading_of([], 100.0, 60.0) == Reading({}, None)
