"""bench/bench_quota.py's scenario at a tiny scale, so that it cannot rot: a pilot of three stand-in attempts, then
a campaign of four under `"max_active_tasks": "auto"` learning from it, through the real gateway against a scripted
quota, on compressed time; every figure of the benchmark's table comes out of it. The quota is generous: every
attempt ends valid whatever the machine's load, so the counts are exact."""

from __future__ import annotations

import math
from pathlib import Path

import orjson

from bench.bench_quota import before, row, throttled_row
from bench.quota_profile import plan_tasks
from bench.quota_scenario import AUTO, run_campaign
from bench.quota_world import QuotaSpec

FACTOR = 600.0
QUOTA = QuotaSpec("T", ({"d1": 5_000_000, "d2": 5_000_000},), "event")


def test_the_scenario_runs_end_to_end_and_gives_its_figures(tmp_path: Path) -> None:
    pilot = run_campaign(tmp_path, "pilot", QUOTA, plan_tasks("p", 3, 1), 2, FACTOR)
    assert [a.outcome for a in pilot.attempts] == ["valid"] * 3, [a.outcome for a in pilot.attempts]
    plans = plan_tasks("t", 4, 2)
    run = run_campaign(tmp_path, "campaign", QUOTA, plans, AUTO, FACTOR, ceiling=3, pilot=tmp_path / "pilot",
                       throttled={"2x": tmp_path / "pilot"})

    assert sorted(a.key for a in run.attempts) == sorted(plans) and run.valid_ended == 4 and run.rate_limited == 0
    assert all(len(a.calls) == len(plans[a.key].calls) for a in run.attempts), "every planned call was answered"
    charged = sum(plan.charged_tokens for plan in plans.values()) / len(plans)
    assert math.isclose(run.valid(charged), 4.0), "a whole campaign counts its four attempts' whole work"
    assert 0 < run.quota_share(QUOTA.tpm) < 1 and 0 <= run.wait_share < 1
    assert run.held_per_valid_sec(charged) >= min(plan.unthrottled_sec for plan in plans.values())
    assert run.tokens_per_valid(charged) > 0 and run.cost_per_valid(charged) > 0
    assert run.limits and run.limits[0][1] >= 1 and run.mean_limit is not None

    forecast = run.forecast
    assert forecast is not None and forecast.sample_attempts == 3 and forecast.safe_concurrency is not None
    assert forecast.binding is not None and forecast.binding.startswith("tpm of 127.0.0.1:")
    line = row(QUOTA, "auto", run, charged, 600.0)
    assert line.startswith("T auto") and line.count("%") == 4, line
    assert run.throttled["2x"].wall_time_sec == forecast.wall_time_sec, "the same pilot, the same forecast"
    assert forecast.attempt_sec is not None and forecast.concurrency == 3, "auto's ceiling, a simulated fleet"
    assert before(forecast).expected == forecast.attempt_sec.mean * forecast.attempts / min(
        3, forecast.safe_concurrency_exact or 3)
    line = throttled_row(QUOTA, "auto", run, charged)
    assert line.startswith("T auto") and line.count("%") == 2, line
    assert line.split()[-4:] == [forecast.wall_time_bound, "-", "-", "-"], "no pilot at 4x: its cells are empty"

    results = [orjson.loads(path.read_bytes()) for path in (tmp_path / "campaign" / "tasks").glob("*/result.json")]
    assert len(results) == 4 and all(r["usage"]["model_calls"] == len(plans[r["task_id"]].calls) for r in results)
    logged = (tmp_path / "campaign" / "gateway-tokens.jsonl").read_bytes().splitlines()
    assert len(logged) >= sum(len(plan.calls) for plan in plans.values()), "the real gateway logged every call"
