"""The forecast against a pilot run whose figures are known (tests/quota/pilot.py), the arithmetic done by hand
here: medians, 90th percentiles, rates, the safe concurrency and which limit binds, the ranges."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hcu.osworld.quota.delivered import ResourceDelivered
from hcu.osworld.quota.forecast import Campaign, MemoryFit, make_forecast
from hcu.osworld.quota.limits import QuotaLimit
from hcu.osworld.quota.profile import PilotError, open_pilot, read_pilots
from hcu.osworld.quota.report import plan_lines
from hcu.osworld.records.cost import ModelPrice
from tests.quota.pilot import DURATION_SEC, MODEL, PRICES, ROW_COST, build_pilot, row

T_95_4 = 2.1318
"""Student's t, 95% quantile, 4 degrees of freedom (any printed table): five pilot attempts."""
PRICED = {name: ModelPrice.model_validate(price) for name, price in PRICES.items()}


def campaign(**changes: object) -> Campaign:
    base = {"attempts": 12, "max_active_tasks": 2, "provider": "openai", "model": MODEL,
            "quota": {"openai": QuotaLimit(tpm=100_000, rpm=10)}, "upstreams": None, "upstreams_from": "unknown",
            "memory": MemoryFit(7, "this host"), "memory_binds": True, "priced": True}
    return Campaign(**{**base, **changes})  # type: ignore[arg-type]


def pilot_sample(tmp_path: Path, **build: object):
    return read_pilots([build_pilot(tmp_path / "pilot", **build)], "codex", MODEL, "xhigh", PRICED)


def test_the_figures_of_one_attempt(tmp_path: Path) -> None:
    sample = pilot_sample(tmp_path)
    assert len(sample.attempts) == 5, "the retry that never reached the agent phase is left out"
    f = make_forecast(sample, campaign())
    # attempt k made 10k calls of 10,200 tokens: 102,000k tokens
    assert (f.tokens_per_attempt.median, f.tokens_per_attempt.p90) == (306_000, pytest.approx(408_000 + 0.6 * 102_000))
    assert (f.calls_per_attempt.median, f.calls_per_attempt.p90) == (30, pytest.approx(46))
    assert f.input_tokens_per_attempt.median == 300_000 and f.cached_input_tokens_per_attempt.median == 180_000
    assert f.output_tokens_per_attempt.median == 6_000
    # rates over the agent phase less rate-limit waits: 102k/10min, 204k/20min, 306k/(900-300)s, 408k/20, 510k/25
    # = 10.2k, 10.2k, 30.6k, 20.4k, 20.4k per minute; calls 1, 1, 3, 2, 2 per minute
    assert f.tokens_per_minute_per_attempt.median == pytest.approx(20_400)
    assert f.tokens_per_minute_per_attempt.p90 == pytest.approx(20_400 + 0.6 * 10_200)
    assert (f.calls_per_minute_per_attempt.median, f.calls_per_minute_per_attempt.p90) == (2, pytest.approx(2.6))
    assert f.agent_phase_sec.median == 1200 and f.attempt_sec.median == 1300
    assert list(f.by_domain) == ["os"] and f.by_domain["os"].attempts == 5


def test_safe_concurrency_and_which_limit_binds(tmp_path: Path) -> None:
    sample = pilot_sample(tmp_path)
    tpm_binds = make_forecast(sample, campaign())  # 100,000 / 26,520 = 3.77 against 10 / 2.6 = 3.85
    assert (tpm_binds.safe_concurrency, tpm_binds.binding) == (3, "tpm of openai")
    assert tpm_binds.safe_concurrency_exact == pytest.approx(100_000 / 26_520, abs=1e-3)
    rpm_binds = make_forecast(sample, campaign(quota={"openai": QuotaLimit(tpm=100_000, rpm=8)}))  # 8 / 2.6 = 3.08
    assert (rpm_binds.safe_concurrency, rpm_binds.binding) == (3, "rpm of openai")
    upstreams = ["r1.example@d1", "r1.example@d2", "r2.example"]
    quota = {"r1.example@d1": QuotaLimit(tpm=60_000), "r1.example@d2": QuotaLimit(tpm=40_000),
             "r2.example": QuotaLimit(tpm=50_000)}
    summed = make_forecast(sample, campaign(quota=quota, upstreams=upstreams))  # 150,000 / 26,520 = 5.66
    assert (summed.safe_concurrency, summed.binding) == (5, "tpm of r1.example@d1 + r1.example@d2 + r2.example")
    capped = make_forecast(sample, campaign(quota={**quota, "openai": QuotaLimit(tpm=120_000)}, upstreams=upstreams))
    assert (capped.safe_concurrency, capped.binding) == (4, "tpm of openai")  # 120,000 / 26,520 = 4.52
    assert (tpm_binds.safe_concurrency_wait_share, rpm_binds.safe_concurrency_wait_share) == (0, 0), "3 fit"


def test_a_quota_that_serves_less_than_one_attempt_still_serves_one(tmp_path: Path) -> None:
    # 23,868 tpm over the p90 rate of 26,520: 0.9 of an attempt; one attempt runs, slowed, waiting 1 - 0.9/1
    f = make_forecast(pilot_sample(tmp_path), campaign(quota={"openai": QuotaLimit(tpm=23_868)}))
    assert (f.safe_concurrency, f.safe_concurrency_exact, f.binding) == (1, 0.9, "tpm of openai")
    assert f.safe_concurrency_wait_share == pytest.approx(0.1)
    assert ("  safe concurrency: 1 attempts at once (0.9; binding: tpm of openai; at 1 an attempt waits 10% of its "
            "agent phase)") in plan_lines(f)
    # 2 at once: the attempts' length, 12 x 1,120 / 2 = 6,720 s, is shorter than the quota's 12 x 306,000 / 23,868
    # minutes (9,230.7 s): the quota binds, once
    assert f.wall_time_bound == "tpm" and f.wall_time_sec.expected == pytest.approx(12 * 306_000 / 23_868 * 60)
    assert f.wall_time_bounds["attempts"].wall_time_sec.expected == pytest.approx(6_720)


def test_a_throttled_pilot_counts_its_waits_once(tmp_path: Path) -> None:
    sample = pilot_sample(tmp_path, throttled=True)
    assert sorted(a.attempt_id for a in sample.attempts) == ["pilot.p1.a2", "pilot.p2.a2", "pilot.p3.a1",
                                                             "pilot.p4.a1", "pilot.p5.a1"], "p2-1 was cut short"
    assert sample.sources[0].endswith(": 5 attempts that reached the agent phase, 5 with tokens; 1 that ended "
                                      "upstream_rate_limit left out (cut short by the quota)")
    # waits: the gateway's 100, 300, 300, 300, 400 s and p5's resume after 100 s: 100, 300, 300, 300, 500 s
    assert [a.waited_sec for a in sample.attempts] == [100, 300, 300, 300, 500]
    # durations 700, 1300, 1000, 1300, 1600 less the waits: 600, 1000, 700, 1000, 1100 (mean 880, variance
    # (280^2 + 120^2 + 180^2 + 120^2 + 220^2) / 4 = 47,000)
    assert [a.unthrottled_sec for a in sample.attempts] == [600, 1000, 700, 1000, 1100]
    # rates over the agent phases 600, 1200, 900, 1200, 1500 less the waits: 102k/500 s, 204k/900 s, 306k/600 s,
    # 408k/900 s, 510k/1,000 s = 12,240, 13,600, 30,600, 27,200, 30,600 tokens a minute: p90 30,600
    quota = {"openai": QuotaLimit(tpm=61_200)}  # 2 attempts at the p90 rate
    f = make_forecast(sample, campaign(max_active_tasks=4, quota=quota))
    assert f.tokens_per_minute_per_attempt.p90 == pytest.approx(30_600)
    assert (f.safe_concurrency, f.safe_concurrency_exact, f.safe_concurrency_wait_share) == (2, 2.0, 0)
    # at 4 at once the attempts' length bounds 12 x 880 / 4 = 2,640 s; the quota's tokens 12 x 306,000 / 61,200 =
    # 60 minutes: the quota binds. Whole durations over the safe concurrency would say 12 x 1,180 / 2 = 7,080 s.
    n, count = 5, 12
    growth = math.sqrt(count + count**2 / n)
    length_half = T_95_4 * math.sqrt(47_000) * growth / 4
    tokens_half = T_95_4 * 102_000 * math.sqrt(2.5) * growth * 60 / 61_200
    assert f.wall_time_bounds["attempts"].wall_time_sec.expected == pytest.approx(2_640)
    assert f.wall_time_bounds["attempts"].of == "the attempts' length at 4 at once (max_active_tasks)"
    assert f.wall_time_bounds["tpm"].of == "tokens over the quota's rate (tpm of openai)"
    assert (f.wall_time_bound, f.wall_time_sec.expected) == ("tpm", pytest.approx(3_600))
    assert f.wall_time_sec.low == pytest.approx(max(2_640 - length_half, 3_600 - tokens_half), rel=1e-4)
    assert f.wall_time_sec.high == pytest.approx(max(2_640 + length_half, 3_600 + tokens_half), rel=1e-4)
    assert ("the attempts learned from waited 1500 s on rate limits in all (25% of their time): the wall time takes "
            "their length without these waits, and the quota apart") in f.notes  # of 5,900 s
    below = make_forecast(sample, campaign(max_active_tasks=2, quota=quota))  # 12 x 880 / 2 = 5,280 s
    assert (below.wall_time_bound, below.wall_time_sec.expected) == ("attempts", pytest.approx(5_280))


def test_the_quota_bounds_at_what_it_delivered_to_a_pilot_it_throttled(tmp_path: Path) -> None:
    sample = pilot_sample(tmp_path, throttled=True, spread=True)
    # minutes 0 and 1 hold every attempt's first two rows, which waited; minutes 0 to 4 p2-1's five, which waited:
    # 5 throttled minutes on r1.example. In them, rows 1 to 5 of the six attempts (another run's row is not the
    # pilot's): 30 calls of 10,200 tokens, 306,000 tokens: 61,200 tokens and 6 calls a minute
    delivered = sample.delivered[str(tmp_path / "pilot")]
    assert delivered.by_resource["r1.example"] == ResourceDelivered(minutes=5, tokens=306_000, calls=30)
    quota = {"openai": QuotaLimit(tpm=100_000, rpm=10)}
    f = make_forecast(sample, campaign(max_active_tasks=4, quota=quota, upstreams=["r1.example@d1"]))
    # the pilot got 61.2% of the stated tokens and 60% of the stated calls: tokens bound it, and bound at 61,200:
    # 12 x 306,000 tokens over 61,200 a minute, 60 minutes (36.7 at the stated rate)
    assert f.wall_time_bounds["tpm"].wall_time_sec.expected == pytest.approx(3_600)
    assert f.wall_time_bounds["tpm"].of == ("tokens over the quota's rate (tpm it delivered in 5 throttled minutes of "
                                            "its resources in the runs read, 61% of the 100000 tpm of openai)")
    # calls did not bind the pilot: their stated rate stays, 12 x 30 / 10 = 36 minutes
    assert f.wall_time_bounds["rpm"].of == "model calls over the quota's rate (rpm of openai)"
    assert f.wall_time_bounds["rpm"].wall_time_sec.expected == pytest.approx(2_160)
    assert (f.wall_time_bound, f.wall_time_sec.expected) == ("tpm", pytest.approx(3_600))
    assert f.quota["tpm"].per_minute == 100_000, "what the quota states is printed as it is"
    # a pilot delivered more than the quota states: the stated rate stays (12 x 306,000 / 50,000 minutes)
    above = make_forecast(sample, campaign(quota={"openai": QuotaLimit(tpm=50_000)}, upstreams=["r1.example@d1"]))
    assert above.wall_time_bounds["tpm"].wall_time_sec.expected == pytest.approx(12 * 306_000 / 50_000 * 60)
    elsewhere = make_forecast(sample, campaign(max_active_tasks=4, quota=quota, upstreams=["r2.example"]))
    assert elsewhere.wall_time_bounds["tpm"].wall_time_sec.expected == pytest.approx(12 * 306_000 / 100_000 * 60)
    assert (f"{tmp_path / 'pilot'}: its quota throttled it on r1.example, not this run's upstreams (r2.example): what "
            "it was delivered is not used") in elsewhere.notes
    # unthrottled, only p3's first row waited: one throttled minute says nothing of the quota
    assert pilot_sample(tmp_path / "calm", spread=True).delivered == {}


def test_the_totals_are_ranges(tmp_path: Path) -> None:
    f = make_forecast(pilot_sample(tmp_path), campaign())
    n, count = 5, 12
    growth = math.sqrt(count + count**2 / n)  # sd_total = s * sqrt(N + N^2/n)
    token_sd = math.sqrt(sum((102_000 * (k - 3)) ** 2 for k in range(1, 6)) / (n - 1))
    assert f.tokens_total.expected == pytest.approx(12 * 306_000)
    assert f.tokens_total.low == pytest.approx(12 * 306_000 - T_95_4 * token_sd * growth, rel=1e-4)
    assert f.tokens_total.high == pytest.approx(12 * 306_000 + T_95_4 * token_sd * growth, rel=1e-4)
    assert f.calls_total.expected == pytest.approx(12 * 30)
    assert f.calls_total.high == pytest.approx(360 + T_95_4 * math.sqrt(250) * growth, rel=1e-4)
    # at once: max_active_tasks 2 (memory 7); durations less waits (p3's 300 s): 700, 1300, 700, 1300, 1600, mean
    # 1,120 s, variance (420^2 + 180^2 + 420^2 + 180^2 + 480^2) / 4 = 162,000
    assert (f.concurrency, f.concurrency_binding, f.memory_concurrency) == (2, "max_active_tasks", 7)
    assert sum(DURATION_SEC) / 5 - 300 / 5 == 1120
    assert f.wall_time_bound == "attempts"
    assert f.wall_time_sec.expected == pytest.approx(12 * 1120 / 2)
    assert f.wall_time_sec.low == pytest.approx((12 * 1120 - T_95_4 * math.sqrt(162_000) * growth) / 2, rel=1e-4)
    # the quota's bounds, shorter: 12 x 306,000 tokens / 100,000 tpm = 36.72 min; 12 x 30 calls / 10 rpm = 36 min
    assert f.wall_time_bounds["tpm"].wall_time_sec.expected == pytest.approx(36.72 * 60)
    assert f.wall_time_bounds["rpm"].wall_time_sec.expected == pytest.approx(36 * 60)
    assert f.wall_time_bounds["rpm"].of == "model calls over the quota's rate (rpm of openai)"
    assert f.cost_usd.expected == pytest.approx(12 * 30 * ROW_COST)  # mean 30 rows an attempt
    assert f.cost_usd.high == pytest.approx(12 * 30 * ROW_COST + T_95_4 * math.sqrt(250) * ROW_COST * growth,
                                            rel=1e-4)
    tight = make_forecast(pilot_sample(tmp_path / "b"), campaign(attempts=2_000))
    half = T_95_4 * token_sd * math.sqrt(2_000 + 2_000**2 / n)
    assert tight.tokens_total.low == pytest.approx(2_000 * 306_000 - half, rel=1e-4)
    assert tight.tokens_total.low > 0, "clipped at 0 only when the interval reaches below it"


def test_what_cannot_be_known_is_null_and_said(tmp_path: Path) -> None:
    from hcu.osworld.quota.profile import Sample

    f = make_forecast(Sample(), campaign(quota=None, priced=False))
    assert f.tokens_per_attempt is None and f.safe_concurrency is None and f.binding is None
    assert f.wall_time_sec.model_dump() == {"low": None, "expected": None, "high": None}
    assert f.cost_usd.expected is None and f.tokens_total.expected is None
    said = " ".join(f.unknown)
    assert "no attempt to learn from" in said and "no quota" in said and "no price for gpt-5.5" in said
    one = make_forecast(Sample(attempts=pilot_sample(tmp_path).attempts[:1]), campaign())
    assert one.tokens_total.expected == 12 * 102_000 and one.tokens_total.low is None
    assert any("one attempt" in line for line in one.unknown)


def test_a_torn_line_is_reported_and_skipped(tmp_path: Path) -> None:
    sample = pilot_sample(tmp_path, torn=True)
    assert [note for note in sample.notes if "unreadable" in note] == [
        f"{tmp_path / 'pilot' / 'gateway-tokens.jsonl'}: 1 unreadable lines skipped (torn or not a row: line 31)"]
    assert sorted(a.quota_tokens for a in sample.attempts) == [102_000 * k for k in range(1, 6)]


def test_a_foreign_token_log_is_reported_and_skipped(tmp_path: Path) -> None:
    run_dir = build_pilot(tmp_path / "pilot")
    (run_dir / "gateway-tokens.jsonl").write_bytes(b"".join(row("elsewhere.p1.a1", n) for n in range(1, 4)))
    sample = read_pilots([run_dir], "codex", MODEL, "xhigh", PRICED)
    assert any("no row of run pilot (a foreign token log); skipped" in note for note in sample.notes)
    assert len(sample.attempts) == 5 and all(a.quota_tokens is None and a.calls is None for a in sample.attempts)
    f = make_forecast(sample, campaign())
    assert f.tokens_per_attempt is None and f.safe_concurrency is None and f.agent_phase_sec.median == 1200


def test_rows_of_another_model_leave_their_attempt_without_tokens(tmp_path: Path) -> None:
    run_dir = build_pilot(tmp_path / "pilot")
    with (run_dir / "gateway-tokens.jsonl").open("ab") as log:
        log.write(row("pilot.p3.a1", 99, model="gpt-4o"))
    sample = read_pilots([run_dir], "codex", MODEL, "high", PRICED)
    assert sorted(a.attempt_id for a in sample.attempts if a.quota_tokens is None) == ["pilot.p3.a1"]
    assert any("1 attempts with rows of another model than gpt-5.5" in note for note in sample.notes)
    assert any("ran effort xhigh; this run's is high" in note for note in sample.notes)


@pytest.mark.parametrize("build, agent, model, says", [
    ({"agent": "claude-code", "model": "claude-opus-5"}, "codex", MODEL, "is a run of agent claude-code; this run's "
     "agent is codex"),
    ({"model": "gpt-5.4"}, "codex", MODEL, "is a run of model gpt-5.4; this run's model is gpt-5.5"),
    (None, "codex", MODEL, "is not a run directory"),
])
def test_a_pilot_of_another_agent_or_model_or_no_run_is_refused(tmp_path: Path, build, agent, model, says) -> None:
    path = build_pilot(tmp_path / "pilot", **build) if build is not None else tmp_path
    with pytest.raises(PilotError, match=says):
        open_pilot(path, agent, model)
    with pytest.raises(PilotError, match="this run's own directory"):
        open_pilot(tmp_path, agent, model, own_run_dir=tmp_path)
