"""Launch order: longest expected first, from earlier runs' durations; the config's order when none is known."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.osworld.queue.order import LaunchQueue, expected_durations
from hcu.osworld.run_config import parse_config


def earlier_run(results_dir: Path, run_id: str, durations: dict[str, float], *, version: str = "v1",
                failure: str | None = None) -> Path:
    run_dir = results_dir / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps({"benchmark_version": version}))
    for task_id, seconds in durations.items():
        (run_dir / "tasks" / task_id).mkdir(parents=True)
        result = {"status": "error" if failure else "completed", "score": None if failure else 1.0,
                  "failure_classification": failure, "duration_sec": seconds}
        (run_dir / "tasks" / task_id / "result.json").write_bytes(orjson.dumps(result))
    return run_dir


def config(tmp_path: Path, tasks: list[str], **keys: object):
    body = {"benchmark_version": "v1", "agent": "codex", "test_desktop": True, "gateway": "http://127.0.0.1:9",
            "results_dir": str(tmp_path / "runs"), "run_id": "now", "tasks": tasks, **keys}
    return parse_config(body, tmp_path / "now.json")


def order(task_ids: list[str], expected: dict[str, float]) -> list[str]:
    queue = LaunchQueue([(task_id, 1) for task_id in task_ids], expected)
    for task_id in task_ids:
        queue.push(task_id)
    return [queue.pop() for _ in task_ids]


def test_median_of_earlier_runs_ignoring_infrastructure_failures_and_other_versions(tmp_path: Path):
    runs = tmp_path / "runs"
    earlier_run(runs, "r1", {"a": 100, "b": 900, "c": 50})
    earlier_run(runs, "r2", {"a": 300, "b": 700})
    earlier_run(runs, "r3", {"a": 200})
    earlier_run(runs, "broken", {"c": 5000}, failure="guest")  # how long a broken guest took says nothing
    earlier_run(runs, "v2-run", {"c": 9000}, version="v2")
    assert expected_durations(config(tmp_path, ["a", "b", "c", "d"])) == {"a": 200, "b": 800, "c": 50}
    chosen = config(tmp_path, ["a", "b", "c"], expected_durations_from=[str(runs / "r3")])
    assert expected_durations(chosen) == {"a": 200}
    assert expected_durations(config(tmp_path, ["a", "b"], expected_durations_from=[])) == {}


def test_longest_first_unknown_at_the_median_ties_in_config_order():
    expected = {"short": 10.0, "long": 500.0, "mid": 100.0}
    assert order(["short", "new", "long", "mid"], expected) == ["long", "new", "mid", "short"]
    assert order(["c", "a", "b"], {}) == ["c", "a", "b"]


@pytest.mark.docker
def test_the_queue_launches_longest_expected_first(make_panel):
    tasks = ["t1", "t2", "t3", "t4"]
    panel = make_panel(tasks, max_active_tasks=1, sleep_sec=(0.05, 0.1))
    earlier_run(panel.config.results_dir, "earlier", {"t1": 60, "t2": 600, "t3": 300})
    panel.run()
    launched = [e["task_id"] for e in panel.queue_events() if e["event"] == "launch"]
    assert launched == ["t2", "t3", "t4", "t1"]  # t4 is unknown: the median of the known (300), after t3
