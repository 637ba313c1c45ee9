"""QUEUE_STATUS.md while a run goes: the forecast, learned from forecast_from and the run's own finished attempts,
gives the ETA, tokens, calls and cost to go. The real queue and run directory on a clock the test moves; an
in-memory executor whose attempts end after a set time with a result carrying usage, phases and cost."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.result import PhaseTiming, TaskResult, Usage
from hcu.osworld.run_config import parse_config
from hcu.record_io import write_record
from tests.queue.test_launch_pacing import ATTEMPT_SEC, POLL_SEC, MovingClock, TimedExecutor
from tests.quota.pilot import PRICES, build_pilot

OWN_USAGE = Usage(model_calls=20, requests=20, input_tokens=200_000, cached_input_tokens=120_000,
                  output_tokens=4_000, fully_accounted=True)
"""Each of this run's attempts: 204,000 tokens in a 10-minute agent phase."""


class UsageExecutor(TimedExecutor):
    """Attempts that end ATTEMPT_SEC after launch with a result as run_task writes it (usage, phases, cost)."""

    def settle(self, active: ActiveAttempt) -> None:
        attempt = AttemptId(run_id="live", task_id=active.task_id, attempt=active.attempt)
        write_record(active.result_dir / "result.json", TaskResult(
            status="completed", score=1.0, task_id=active.task_id, attempt=active.attempt, run_id="live",
            attempt_id=str(attempt), usage=OWN_USAGE, cost_usd=0.155, duration_sec=ATTEMPT_SEC,
            phases=[PhaseTiming(name="agent", started_at=active.started_at, duration_sec=600.0)]))


def host_with_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose memory admits 7 guests: it never binds at 2 at once."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal: {16 << 20} kB\nMemAvailable: {8 << 20} kB\n")
    monkeypatch.setenv(HOST_PROC_ENV, str(tmp_path / "proc"))


class WaitingExecutor(TimedExecutor):
    """Attempts whose results say they took 1,000 s, of which they waited 240 s at the gateway and one resume delay
    of the run's `rate_limit_resume_delay` (60 s): 300,000 tokens in a 900-s agent phase, 600 s of it asking."""

    def settle(self, active: ActiveAttempt) -> None:
        attempt = AttemptId(run_id="waited", task_id=active.task_id, attempt=active.attempt)
        usage = Usage(model_calls=30, requests=34, input_tokens=290_000, output_tokens=10_000,
                      rate_limit_wait_sec=240.0, fully_accounted=True)
        write_record(active.result_dir / "result.json", TaskResult(
            status="completed", score=1.0, task_id=active.task_id, attempt=active.attempt, run_id="waited",
            attempt_id=str(attempt), usage=usage, duration_sec=1_000.0, rate_limit_resumes=1,
            phases=[PhaseTiming(name="agent", started_at=active.started_at, duration_sec=900.0)]))


def test_attempts_that_waited_do_not_make_the_eta_longer_twice(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    host_with_room(tmp_path, monkeypatch)
    config = parse_config({"run_id": "waited", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
                           "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "expected_durations_from": [],
                           "tasks": [f"t{i}" for i in range(6)], "max_active_tasks": 2, "launch_stagger_seconds": 0,
                           "rate_limit_resume_delay": 60, "quota": {"openai": {"tpm": 45_000}}}, tmp_path / "w.json")
    clock = MovingClock()
    clock.stop_at = clock.now + ATTEMPT_SEC + 5  # two attempts ended, two running, two pending
    with pytest.raises(KeyboardInterrupt):
        run_queue(config, executor=WaitingExecutor(clock, {}), clock=clock, poll_interval_sec=POLL_SEC)
    status = (tmp_path / "waited" / "QUEUE_STATUS.md").read_text()
    # each ended attempt: 1,000 s less 300 s of waits = 700 s; 300,000 tokens over 600 s = 30,000 a minute
    assert "Forecast from 2 attempts (2 of this run, 0 of forecast_from); one running attempt 30.0k tokens/min" \
        in status
    assert "safe concurrency 1 (tpm of openai)" in status  # 45,000 / 30,000 = 1.5
    # 4 to go: their length at 2 at once is 4 x 700 / 2 = 1,400 s; the quota's tokens 4 x 300,000 / 45,000 = 26.7
    # minutes. Whole durations over the quota's 1.5 attempts would say 4 x 1,000 / 1.5 = 44m27s.
    assert "ETA: 26m40s (26m40s to 26m40s), bound by tokens over the quota's rate (tpm of openai)." in status, status


def test_the_status_forecasts_what_is_to_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_with_room(tmp_path, monkeypatch)
    build_pilot(tmp_path / "pilot")
    config = parse_config({"run_id": "live", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
                           "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "expected_durations_from": [],
                           "tasks": [f"t{i}" for i in range(6)], "max_active_tasks": 2, "launch_stagger_seconds": 0,
                           "forecast_from": ["pilot"], "prices": PRICES,
                           "quota": {"openai": {"tpm": 100_000}}}, tmp_path / "live.json")
    clock = MovingClock()
    clock.stop_at = clock.now + ATTEMPT_SEC + 5  # two attempts ended, two running, two pending
    with pytest.raises(KeyboardInterrupt):
        run_queue(config, executor=UsageExecutor(clock, {}), clock=clock, poll_interval_sec=POLL_SEC)
    status = (tmp_path / "live" / "QUEUE_STATUS.md").read_text()
    # 7 attempts: the pilot's 102k..510k tokens and this run's two of 204k; mean 276,857; 4 to go
    assert "To go: 4 attempts (2 running, counted whole): tokens 1.11M (" in status, status
    assert "model calls 109 (" in status  # 4 x mean(10, 20, 30, 40, 50, 20, 20) = 4 x 27.14
    assert "cost 0.84 USD (" in status  # 4 x mean(0.0775 .. 0.3875 the pilot's, 0.155 twice) = 4 x 0.2104
    # durations less waits 700, 1300, 700 (p3 waited 300 s), 1300, 1600 and 25 twice: mean 807.14 s, 4 to go 2 at
    # once: 1,614.3 s; the quota's tokens take 4 x 276,857 / 100,000 tpm = 11.1 min
    assert "ETA: 26m54s (" in status and "), bound by the attempts' length at 2 at once (max_active_tasks)." in status
    # rates per minute 10.2k, 10.2k, 30.6k, 20.4k, 20.4k and 20.4k twice: p90 at 5.4 of 6 = 24,480; 100k / 24,480
    assert "Forecast from 7 attempts (2 of this run, 5 of forecast_from)" in status
    assert "one running attempt 20.4k tokens/min median, 24.5k p90; safe concurrency 4 (tpm of openai)" in status
    events = [orjson.loads(line) for line in (tmp_path / "live" / "logs" / "queue.jsonl").read_bytes().splitlines()]
    assert sum(e["event"] == "exit" for e in events) == 2
