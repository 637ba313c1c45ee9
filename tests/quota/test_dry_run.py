"""`run_queue CONFIG --dry-run [--json]` with forecast_from and quota, as a user runs it (a subprocess): the
forecast's JSON keys and figures, its printout, and bad input refused in one line (exit 2) with nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.guest.host import HOST_PROC_ENV
from tests.gateway.conftest import gateway_running
from tests.quota.pilot import PRICES, ROW_COST, build_pilot

GIB_KB = 1 << 20


def campaign_config(tmp_path: Path, **keys: object) -> Path:
    """Tasks t1..t4 with 3 repeats each, learning from the pilot at tmp_path/pilot (relative to the config)."""
    body = {"run_id": "campaign", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": "runs", "tasks": ["t1", "t2", "t3", "t4"], "repeats": 3,
            "max_active_tasks": 2, "expected_durations_from": [], "prices": PRICES, "forecast_from": ["pilot"],
            "quota": {"openai": {"tpm": 100_000, "rpm": 10}}, **keys}
    path = tmp_path / "campaign.json"
    path.write_bytes(orjson.dumps(body))
    return path


def dry_run(tmp_path: Path, config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """The dry run on a host whose meminfo says 8 GiB available of 16 GiB."""
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "meminfo").write_text(f"MemTotal:       {16 * GIB_KB} kB\nMemAvailable:   {8 * GIB_KB} kB\n")
    return subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(config), "--dry-run", *flags],
                          capture_output=True, text=True, timeout=120, env={**os.environ, HOST_PROC_ENV: str(proc)})


def finish_t1(tmp_path: Path) -> None:
    """Repeat 1 of t1 is final in the run directory already (it never reached the agent phase)."""
    done = tmp_path / "runs" / "campaign" / "tasks" / "t1"
    done.mkdir(parents=True)
    (done / "result.json").write_bytes(orjson.dumps({"status": "completed", "score": 0.0, "task_id": "t1",
                                                     "attempt": 1, "run_id": "campaign"}))


def test_the_json_forecast(tmp_path: Path) -> None:
    build_pilot(tmp_path / "pilot")
    finish_t1(tmp_path)
    out = dry_run(tmp_path, campaign_config(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n") == 1, "exactly one JSON object"
    forecast = orjson.loads(out.stdout)["forecast"]
    assert {"attempts", "tokens_per_attempt", "calls_per_attempt", "tokens_per_minute_per_attempt",
            "safe_concurrency", "safe_concurrency_exact", "safe_concurrency_wait_share", "binding",
            "memory_concurrency", "wall_time_sec", "wall_time_bound", "wall_time_bounds", "cost_usd"} <= forecast.keys()
    assert (forecast["attempts"], forecast["attempts_done"], forecast["sample_attempts"]) == (11, 1, 5)
    assert {key: forecast["tokens_per_attempt"][key] for key in ("median", "p90")} == {"median": 306_000,
                                                                                      "p90": 469_200}
    assert {key: forecast["calls_per_attempt"][key] for key in ("median", "p90")} == {"median": 30, "p90": 46}
    assert forecast["tokens_per_minute_per_attempt"]["p90"] == pytest.approx(26_520)
    assert (forecast["safe_concurrency"], forecast["binding"]) == (3, "tpm of openai")
    assert forecast["memory_concurrency"] == 7  # (8 GiB available - 0.5 GiB kept free) / 1 GiB per test desktop
    assert set(forecast["wall_time_sec"]) == set(forecast["cost_usd"]) == {"low", "expected", "high"}
    # 2 at once (max_active_tasks); the pilot's durations less p3's 300 s of waits: mean 1,120 s
    assert forecast["wall_time_sec"]["expected"] == pytest.approx(11 * 1120 / 2)
    assert forecast["wall_time_bound"] == "attempts" and set(forecast["wall_time_bounds"]) == {"attempts", "tpm", "rpm"}
    tokens_over_tpm = {key: value * 60 / 100_000 for key, value in forecast["tokens_total"].items()}
    assert forecast["wall_time_bounds"]["tpm"] == {"of": "tokens over the quota's rate (tpm of openai)",
                                                   "wall_time_sec": pytest.approx(tokens_over_tpm)}
    assert forecast["cost_usd"]["expected"] == pytest.approx(11 * 30 * ROW_COST)
    assert forecast["upstreams_from"].startswith("the gateway at http://127.0.0.1:9 did not answer")
    assert not (tmp_path / "runs" / "campaign" / "config.json").exists(), "a dry run writes nothing"


def test_the_printout_and_what_it_cannot_know(tmp_path: Path) -> None:
    build_pilot(tmp_path / "pilot")
    out = dry_run(tmp_path, campaign_config(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "  attempts to run: 12 (0 final in the run directory already)" in out.stdout
    assert ("  safe concurrency: 3 attempts at once (3.771; binding: tpm of openai; at 3 an attempt waits 0% of its "
            "agent phase)") in out.stdout
    assert "  wall time: 1h52m (" in out.stdout  # 12 x 1,120 s / 2
    assert "), bound by the attempts' length at 2 at once (max_active_tasks)\n" in out.stdout
    assert "    bounds: the attempts' length at 2 at once (max_active_tasks) 1h52m (" in out.stdout
    assert "; tokens over the quota's rate (tpm of openai) 36m43s (" in out.stdout  # 12 x 306,000 / 100,000 min
    assert ("  note: the attempts learned from waited 300 s on rate limits in all (5% of their time): the wall time "
            "takes their length without these waits, and the quota apart") in out.stdout
    assert "  tokens total: 3.67M (" in out.stdout and "  cost: 2.79 USD (" in out.stdout
    blind = dry_run(tmp_path, campaign_config(tmp_path, forecast_from=None, quota=None, prices=None), "--json")
    forecast = orjson.loads(blind.stdout)["forecast"]
    assert forecast["safe_concurrency"] is None and forecast["tokens_per_attempt"] is None
    assert forecast["wall_time_sec"] == forecast["cost_usd"] == {"low": None, "expected": None, "high": None}
    assert any("no attempt to learn from" in line for line in forecast["unknown"])


@pytest.mark.parametrize("pilot, keys, says", [
    ({"agent": "claude-code", "model": "claude-opus-5"}, {},
     "forecast_from[0]: {pilot} is a run of agent claude-code; this run's agent is codex"),
    ({"model": "gpt-5.4"}, {}, "forecast_from[0]: {pilot} is a run of model gpt-5.4; this run's model is gpt-5.5"),
    (None, {}, "forecast_from[0]: {pilot} is not a run directory"),
    ({}, {"quota": {"openai": {"tpm": -5}}}, "quota.openai.tpm: Input should be greater than 0"),
    ({}, {"quota": {"openai": {"tpm": "many"}}}, "quota.openai.tpm: Input should be a valid integer"),
    ({}, {"quota": {"openai": {}}}, "quota.openai: expected tpm, rpm or both"),
    ({}, {"quota": {"anthropic": {"tpm": 5}}},
     "quota.anthropic: no gateway upstream or provider of this run is named anthropic"),
    ({}, {"quota": {"not a host!": {"tpm": 5}}}, "quota.not a host!: expected a provider"),
    ({}, {"quota": {"r3.example": {"tpm": 5}}, "executor": "ray", "gateway": None,
          "ray": {"address": "auto", "node_gateway": {"upstream_args": ["--upstreams", "r1.example@d1,r2.example"]}}},
     "quota.r3.example: no gateway upstream or provider of this run is named r3.example (provider: openai; "
     "upstreams: r1.example@d1, r2.example)"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, pilot: dict | None, keys: dict, says: str) -> None:
    if pilot is None:
        (tmp_path / "pilot").mkdir()
    else:
        build_pilot(tmp_path / "pilot", **pilot)
    out = dry_run(tmp_path, campaign_config(tmp_path, **keys))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert says.format(pilot=tmp_path / "pilot") in out.stderr
    assert not (tmp_path / "runs").exists(), "nothing started"


@pytest.fixture
def gateway_with_upstreams(tmp_path: Path):
    """The real gateway, serving three upstreams it never needs to reach (only /healthz is asked)."""
    with gateway_running("openai_proxy", [
            "--upstreams", "r1.example@d1,r1.example@d2,r2.example:8443", "--upstream-kind", "azure",
            "--out", str(tmp_path / "gateway-tokens.jsonl"), "--max-requests-per-task", "100"],
            env={"OSW_OPENAI_UPSTREAM_TOKEN": "unused"}) as url:
        yield url


def test_quota_keys_are_matched_against_the_gateways_upstreams(tmp_path: Path, gateway_with_upstreams: str) -> None:
    build_pilot(tmp_path / "pilot")
    quota = {"r1.example@d1": {"tpm": 60_000}, "r1.example@d2": {"tpm": 40_000}, "r2.example:8443": {"tpm": 50_000}}
    out = dry_run(tmp_path, campaign_config(tmp_path, gateway=gateway_with_upstreams, quota=quota), "--json")
    assert out.returncode == 0, out.stderr
    forecast = orjson.loads(out.stdout)["forecast"]
    assert forecast["upstreams"] == ["r1.example@d1", "r1.example@d2", "r2.example:8443"]
    assert forecast["quota"]["tpm"] == {"per_minute": 150_000,
                                        "of": "tpm of r1.example@d1 + r1.example@d2 + r2.example:8443"}
    assert forecast["safe_concurrency"] == 5  # 150,000 / 26,520 = 5.66
    unknown = dry_run(tmp_path, campaign_config(tmp_path, gateway=gateway_with_upstreams,
                                                quota={"r2.example": {"tpm": 5}}))
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert unknown.stderr.endswith("quota.r2.example: no gateway upstream or provider of this run is named r2.example "
                                   "(provider: openai; upstreams: r1.example@d1, r1.example@d2, r2.example:8443)\n")


def test_under_auto_the_admission_starts_at_the_safe_concurrency(tmp_path: Path) -> None:
    build_pilot(tmp_path / "pilot")
    config = campaign_config(tmp_path, max_active_tasks="auto", auto_max_active_tasks=8)
    plan = orjson.loads(dry_run(tmp_path, config, "--json").stdout)
    assert plan["admission"] == {"start": 3, "signal": "forecast", "ceiling": 8,
                                 "reason": "the forecast's safe concurrency 3"}
    # auto holds about the safe concurrency, 3.771 (under the ceiling of 8 and this host's memory, 7): the attempts'
    # length at it, 12 x 1,120 / 3.771 = 3,564 s, is longer than the quota's tokens, 12 x 306,000 / 100,000 tpm
    forecast = plan["forecast"]
    assert (forecast["concurrency"], forecast["concurrency_binding"]) == (
        3.771, "auto, at the quota's safe concurrency (tpm of openai)")
    assert forecast["wall_time_bound"] == "attempts"
    assert forecast["wall_time_sec"]["expected"] == pytest.approx(12 * 1120 / 3.771)
    assert forecast["wall_time_bounds"]["tpm"]["wall_time_sec"]["expected"] == pytest.approx(2_203.2)
    out = dry_run(tmp_path, config)
    assert out.returncode == 0, out.stderr
    assert ("max_active_tasks: auto, at most 8 at once; starts at 3 (the forecast's safe concurrency 3) and follows "
            "the quota") in out.stdout
    assert not (tmp_path / "runs" / "campaign").exists(), "a dry run writes nothing"
