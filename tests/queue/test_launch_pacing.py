"""Launch pacing on a clock the test moves: the stagger between launches, the cap, and the launch pause after a
rate-limited attempt, held across a restart. The real queue and run directory; an in-memory executor whose
attempts last a set time on that clock (no process, no wall-clock wait)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson
import pytest

from hcu.osworld.errors import policy_for
from hcu.osworld.queue.clock import QueueClock
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.state import TaskView
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.result import TaskResult
from hcu.osworld.run_config import RunConfig, TaskSpec, parse_config
from hcu.record_io import write_record

POLL_SEC = 1.0
ATTEMPT_SEC = 25.0
PAUSE_SEC = policy_for("upstream_rate_limit").pause_launches_sec


class MovingClock(QueueClock):
    """Time that passes only when the queue sleeps; stops the queue (as SIGINT would) at `stop_at`."""

    def __init__(self, start: float = 1_000_000.0, stop_at: float | None = None) -> None:
        self.now, self.stop_at = start, stop_at

    def time(self) -> float:  # type: ignore[override]
        return self.now

    def sleep(self, seconds: float) -> None:  # type: ignore[override]
        self.now += seconds
        if self.stop_at is not None and self.now >= self.stop_at:
            raise KeyboardInterrupt


class TimedExecutor:
    """Attempts that end `duration` seconds after their launch on the clock, with the outcome `outcomes` gives the
    (task, attempt), else a score of 1; `slots` is its capacity (None: unbounded)."""

    name = "timed"

    def __init__(self, clock: MovingClock, outcomes: dict[tuple[str, int], dict] | None = None,
                 duration: float = ATTEMPT_SEC, slots: int | None = None) -> None:
        self.clock, self.outcomes, self.duration, self.slots = clock, outcomes or {}, duration, slots
        self.launched: list[tuple[float, str]] = []

    def capacity(self) -> int | None:
        return self.slots

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        self.launched.append((self.clock.now, task.id))
        return ActiveAttempt(task.id, attempt.attempt, 0, self.clock.now, False, task_dir, None, attempt.repeat)

    def adopt(self, view: TaskView) -> ActiveAttempt:
        raise AssertionError(f"nothing should be left running: {view.key}")

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        return [a.key for a in active if self.clock.now >= a.started_at + self.duration]

    def settle(self, active: ActiveAttempt) -> None:
        run_id = active.result_dir.parent.parent.name
        attempt = AttemptId(run_id=run_id, task_id=active.task_id, attempt=active.attempt)
        outcome = self.outcomes.get((active.task_id, active.attempt), {"status": "completed", "score": 1.0})
        write_record(active.result_dir / "result.json", TaskResult(
            task_id=active.task_id, attempt=active.attempt, run_id=run_id, attempt_id=str(attempt), **outcome))

    def nodes(self) -> dict:
        return {}

    def gateway_reports(self) -> None:
        pass  # no gateway: nothing observed

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        pass

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        return []

    def close(self, run_done: bool) -> None:
        pass


def config(tmp_path: Path, tasks: list[str], **keys: object) -> RunConfig:
    body = {"run_id": "pacing", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "tasks": tasks,
            "expected_durations_from": [], **keys}
    return parse_config(body, tmp_path / "pacing.json")


def peak_running(launched: list[tuple[float, str]]) -> int:
    marks = sorted([(at, 1) for at, _ in launched] + [(at + ATTEMPT_SEC, -1) for at, _ in launched])
    running = peak = 0
    for _, step in marks:
        running += step
        peak = max(peak, running)
    return peak


def test_launches_are_staggered_and_capped(tmp_path: Path) -> None:
    clock = MovingClock()
    executor = TimedExecutor(clock, {})
    tasks = [f"t{i}" for i in range(6)]
    states = run_queue(config(tmp_path, tasks, max_active_tasks=2, launch_stagger_seconds=10),
                       executor=executor, clock=clock, poll_interval_sec=POLL_SEC)
    assert states == dict.fromkeys(tasks, "finished")
    times = [at for at, _ in executor.launched]
    assert sorted(task for _, task in executor.launched) == tasks
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= 10, times
    assert times[1] - times[0] == pytest.approx(10), "the second slot fills as soon as the stagger allows"
    assert peak_running(executor.launched) == 2
    events = [orjson.loads(line) for line in (tmp_path / "pacing" / "logs" / "queue.jsonl").read_bytes().splitlines()]
    assert [e["at"] for e in events if e["event"] == "launch"] == times, "events carry the queue's clock"


def test_a_rate_limited_attempt_pauses_launches_across_a_restart(tmp_path: Path) -> None:
    limited = {"status": "error", "score": None, "failure_classification": "upstream_rate_limit"}
    clock = MovingClock()
    first = TimedExecutor(clock, {("limited", 1): limited})
    cfg = config(tmp_path, ["limited", "next"], max_active_tasks=1, launch_stagger_seconds=0)
    start = clock.now
    clock.stop_at = start + ATTEMPT_SEC + PAUSE_SEC / 3  # stopped during the pause
    with pytest.raises(KeyboardInterrupt):
        run_queue(cfg, executor=first, clock=clock, poll_interval_sec=POLL_SEC)
    assert [task for _, task in first.launched] == ["limited"], "a launch during the pause"
    status = (tmp_path / "pacing" / "QUEUE_STATUS.md").read_text()
    assert "Launches paused" in status, status

    clock.stop_at = None
    second = TimedExecutor(clock, {})
    assert run_queue(cfg, executor=second, clock=clock, poll_interval_sec=POLL_SEC) == {
        "limited": "finished", "next": "finished"}
    resumed = min(at for at, _ in second.launched)
    ended = start + ATTEMPT_SEC  # the limited attempt was set aside then
    assert ended + PAUSE_SEC <= resumed <= ended + PAUSE_SEC + POLL_SEC, "launches resume when the pause ends"
