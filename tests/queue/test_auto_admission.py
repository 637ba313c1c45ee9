"""`"max_active_tasks": "auto"`: the real queue and run directory on a clock the test moves, an in-memory executor
whose attempts last a set time (in their agent phase), and a scripted quota standing in for the gateway's report:
a quota that serves `serves` attempts at once makes each of n running attempts wait 1 - serves/n of its time, as
the gateway's cumulative per-scope waits would show. The limit rises to the quota, falls when waits grow, honours
the ceiling and the executor's slots, only ever holds launches, and resumes from queue.jsonl after a restart."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from hcu.gateway.budget import ScopeWaits
from hcu.osworld.errors import policy_for
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.state import TaskView
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import RunConfig, TaskSpec, parse_config
from hcu.record_io import write_json
from tests.queue.test_launch_pacing import MovingClock, TimedExecutor

POLL_SEC = 10.0
RATE_LIMITED = {"status": "error", "score": None, "failure_classification": "upstream_rate_limit"}


class AgentExecutor(TimedExecutor):
    """Attempts in their agent phase for `duration` seconds of the clock, then scored 1 (or `outcomes`')."""

    def __init__(self, clock: MovingClock, duration: float, slots: int | None = None,
                 outcomes: dict[tuple[str, int], dict] | None = None) -> None:
        super().__init__(clock, outcomes, duration, slots)
        self.running: dict[str, tuple[ActiveAttempt, str]] = {}
        """key -> the attempt and its gateway scope."""

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        write_json(task_dir / "progress.json", {"phase": "agent", "since": self.clock.now})
        active = super().launch(task, attempt, task_dir)
        self.running[active.key] = (active, attempt.gateway_scope)
        return active

    def adopt(self, view: TaskView) -> ActiveAttempt:
        raise AssertionError(f"an attempt without a lease is never adopted: {view.key}")

    def settle(self, active: ActiveAttempt) -> None:
        self.running.pop(active.key)
        super().settle(active)


class ScriptedQuota:
    """The gateway's report (`/healthz?waits=`) over a quota that serves `serves` attempts at once."""

    def __init__(self, clock: MovingClock, executor: AgentExecutor, serves: int) -> None:
        self.clock, self.executor, self.serves = clock, executor, serves
        self.waits: dict[str, float] = defaultdict(float)
        self.at: float | None = None

    def __call__(self) -> list[GatewayReport]:
        scopes = [scope for _, scope in self.executor.running.values()]
        elapsed = 0.0 if self.at is None else self.clock.now - self.at
        self.at = self.clock.now
        for scope in scopes:
            self.waits[scope] += elapsed * max(0.0, 1 - self.serves / len(scopes))
        return [GatewayReport(rate_limit_waits={scope: ScopeWaits(wait_sec=wait, waits=1, waiting_now=0)
                                                for scope, wait in self.waits.items()})]


def config(tmp_path: Path, tasks: int, ceiling: int = 8, **keys: object) -> RunConfig:
    body = {"run_id": "auto", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "tasks": [f"t{i:02d}" for i in range(tasks)],
            "expected_durations_from": [], "launch_stagger_seconds": 0, "max_active_tasks": "auto",
            "auto_max_active_tasks": ceiling, **keys}
    return parse_config(body, tmp_path / "auto.json")


def events(tmp_path: Path) -> list[dict]:
    return [orjson.loads(line) for line in (tmp_path / "auto" / "logs" / "queue.jsonl").read_bytes().splitlines()]


def launches_within_the_limit(found: list[dict]) -> None:
    """At every launch fewer attempts ran than the limit in effect: lowering it only ever held launches."""
    running, limit = 0, None
    for event in found:
        if event["event"] == "limit":
            limit = event["limit"]
        elif event["event"] == "launch":
            assert limit is not None and running < limit, (event, running, limit)
            running += 1
        elif event["event"] == "exit":
            running -= 1


def test_the_limit_follows_the_quota_and_only_holds_launches(tmp_path: Path) -> None:
    clock = MovingClock()
    executor = AgentExecutor(clock, duration=1200.0)
    quota = ScriptedQuota(clock, executor, serves=4)
    states = run_queue(config(tmp_path, 36), executor=executor, clock=clock, poll_interval_sec=POLL_SEC,
                       reports=quota)
    assert set(states.values()) == {"finished"} and len(states) == 36
    found = events(tmp_path)
    limits = [e for e in found if e["event"] == "limit"]
    assert (limits[0]["limit"], limits[0]["signal"], limits[0]["previous"]) == (2, "default", None)
    assert all({"at", "limit", "previous", "signal", "reason", "ceiling"} <= set(e) for e in limits)
    raised = [e for e in limits if e["signal"] == "no_waits"]
    lowered = [e for e in limits if e["signal"] == "waits"]
    assert [e["limit"] for e in raised[:3]] == [3, 4, 5], "up one at a time while nobody waits"
    assert lowered and all(e["previous"] > 4 and e["wait_share"] > 0.1 for e in lowered), \
        "lowered only when more ran than the quota serves, and attempts waited"
    assert max(e["limit"] for e in limits) <= 6, "it settles around the quota, far below the ceiling"
    launches_within_the_limit(found)
    assert all(e["state"] == "finished" for e in found if e["event"] == "exit")
    status = (tmp_path / "auto" / "QUEUE_STATUS.md").read_text()
    assert f"Admission: {limits[-1]['limit']} at once (auto, ceiling 8;" in status, status


@pytest.mark.parametrize("ceiling, slots, top", [(4, None, 4), (8, 3, 3)], ids=["ceiling", "executor slots"])
def test_it_never_passes_the_ceiling_or_the_executor_s_slots(tmp_path: Path, ceiling: int, slots: int | None,
                                                             top: int) -> None:
    clock = MovingClock()
    executor = AgentExecutor(clock, duration=1200.0, slots=slots)
    run_queue(config(tmp_path, 16, ceiling=ceiling), executor=executor, clock=clock, poll_interval_sec=POLL_SEC,
              reports=ScriptedQuota(clock, executor, serves=100))
    assert max(e["limit"] for e in events(tmp_path) if e["event"] == "limit") == top


def test_the_limit_resumes_from_queue_jsonl_after_a_restart(tmp_path: Path) -> None:
    clock = MovingClock()
    start = clock.now
    clock.stop_at = start + 3000
    executor = AgentExecutor(clock, duration=1200.0)
    with pytest.raises(KeyboardInterrupt):
        run_queue(config(tmp_path, 20), executor=executor, clock=clock, poll_interval_sec=POLL_SEC,
                  reports=ScriptedQuota(clock, executor, serves=100))
    before = [e for e in events(tmp_path) if e["event"] == "limit"]
    assert before[-1]["limit"] > 2, "it rose before the stop"

    clock.stop_at = None
    executor = AgentExecutor(clock, duration=1200.0)
    run_queue(config(tmp_path, 20), executor=executor, clock=clock, poll_interval_sec=POLL_SEC,
              reports=ScriptedQuota(clock, executor, serves=100))
    after = [e for e in events(tmp_path) if e["event"] == "limit"][len(before):]
    assert (after[0]["signal"], after[0]["limit"], after[0]["previous"]) == ("resumed", before[-1]["limit"],
                                                                            before[-1]["limit"])
    clock.stop_at = clock.now + POLL_SEC  # once it has stated its limit
    executor = AgentExecutor(clock, duration=1200.0)
    with pytest.raises(KeyboardInterrupt):  # raised repeats: more to run
        run_queue(config(tmp_path, 20, ceiling=2, repeats=2), executor=executor, clock=clock,
                  poll_interval_sec=POLL_SEC, reports=ScriptedQuota(clock, executor, serves=100))
    again = [e for e in events(tmp_path) if e["event"] == "limit"][len(before) + len(after):]
    assert (again[0]["signal"], again[0]["limit"]) == ("ceiling", 2), "a lower ceiling given on resume binds"


def test_a_rate_limited_attempt_lowers_the_limit_instead_of_pausing_launches(tmp_path: Path) -> None:
    clock = MovingClock()
    executor = AgentExecutor(clock, duration=25.0, outcomes={("t00", 1): RATE_LIMITED})
    start = clock.now
    run_queue(config(tmp_path, 3), executor=executor, clock=clock, poll_interval_sec=POLL_SEC,
              reports=ScriptedQuota(clock, executor, serves=100))
    found = events(tmp_path)
    (lowered,) = [e for e in found if e["event"] == "limit" and e["signal"] == "rate_limited"]
    assert (lowered["previous"], lowered["limit"]) == (2, 1)
    later = [e["at"] for e in found if e["event"] == "launch" and e["at"] > start]
    assert max(later) - start < policy_for("upstream_rate_limit").pause_launches_sec, \
        "under auto the five-minute launch pause does not apply"
    launches_within_the_limit(found)
