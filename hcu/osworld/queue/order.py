"""Launch order: the longest expected attempt first, so a run does not end waiting on one long task that
happened to start last (longest-processing-time-first keeps the tail short on many slots).

Expected durations come from earlier runs' result.json files (`expected_durations_from`; by default every other
run in results_dir with the same benchmark_version): a task's median over attempts that ran to an outcome
(infrastructure failures say nothing about how long the task takes). A task no earlier run has seen is
expected to take the median of the known ones; with nothing known, the config's order stands.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterator
from pathlib import Path

import orjson

from hcu.osworld.errors import policy_for
from hcu.osworld.records.identity import repeat_key
from hcu.osworld.records.layout import RESULT_FILE
from hcu.osworld.records.result import result_if_readable
from hcu.osworld.run_config import RunConfig


def earlier_runs(config: RunConfig) -> list[Path]:
    """The run directories whose results give expected durations."""
    if config.expected_durations_from is not None:
        return list(config.expected_durations_from)
    assert config.results_dir is not None
    found = []
    for config_path in sorted(config.results_dir.glob("*/config.json")):
        if config_path.parent == config.run_dir:
            continue
        try:
            version = orjson.loads(config_path.read_bytes()).get("benchmark_version")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            continue
        if version == config.benchmark_version:
            found.append(config_path.parent)
    return found


def expected_durations(config: RunConfig) -> dict[str, float]:
    """Task id -> expected seconds, for the config's tasks that earlier runs finished."""
    wanted = {task.id for task in config.tasks}
    seen: dict[str, list[float]] = {}
    for run_dir in earlier_runs(config):
        for task_id in wanted:
            result = result_if_readable(run_dir / "tasks" / task_id / RESULT_FILE)
            if result is None or result.duration_sec is None:
                continue
            if not policy_for(result.failure_classification).retry:  # a retried attempt's time is not the task's
                seen.setdefault(task_id, []).append(result.duration_sec)
    return {task_id: statistics.median(durations) for task_id, durations in seen.items()}


class LaunchQueue:
    """Pending repeats of tasks (by key, identity.repeat_key): every task's first repeat before any task's second,
    so a run stopped early (a ceiling, a stop) leaves whole rounds rather than a few tasks with all their repeats;
    within a round longest expected first; ties (and a run with nothing known) keep the config's order."""

    def __init__(self, units: list[tuple[str, int]], expected: dict[str, float]) -> None:
        """`units`: (task id, repeat) in the config's order."""
        fallback = statistics.median(expected.values()) if expected else 0.0
        self._key = {repeat_key(task_id, repeat): (repeat, -expected.get(task_id, fallback), index)
                     for index, (task_id, repeat) in enumerate(units)}
        self._heap: list[tuple[tuple[int, float, int], str]] = []

    def push(self, key: str) -> None:
        heapq.heappush(self._heap, (self._key[key], key))

    def pop(self) -> str:
        return heapq.heappop(self._heap)[1]

    def __iter__(self) -> Iterator[str]:
        """The pending keys in launch order (without taking them)."""
        return (key for _, key in sorted(self._heap))

    def __len__(self) -> int:
        return len(self._heap)
