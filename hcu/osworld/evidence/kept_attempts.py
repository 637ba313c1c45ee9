"""What an export reads of a run: each attempt in `tasks/` (the one that counts, per repeat of a task) with its
result, the score that counts or why it is withheld, and its trajectory; whatever of it is missing or unreadable
is None, never a guess."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.records.layout import RESULT_FILE, TRAJECTORY_FILE
from hcu.osworld.records.result import TaskResult, result_if_readable
from hcu.osworld.summary.rows import counted_score

NO_RESULT = "no readable result.json"


@dataclass
class KeptAttempt:
    task_dir: Path
    result: TaskResult | None
    raw: dict
    """result.json as written (fields the model does not name: `cost_usd` of older results, `repeat`)."""
    trajectory: Trajectory | None
    score: float | None
    """The score that counts; None when withheld."""
    withheld: str | None
    """Why there is no score that counts (status and failure class, or no result)."""

    @property
    def folder(self) -> str:
        return self.task_dir.name

    @property
    def task_id(self) -> str:
        return (self.result.task_id if self.result else None) or self.folder.split(".r")[0]

    @property
    def domain(self) -> str:
        return (self.result.task_domain if self.result else None) or "unknown"

    @property
    def repeat(self) -> int:
        return int(self.raw.get("repeat") or _repeat_of(self.folder))

    @property
    def mode(self) -> int | None:
        """The permissions of the attempt's result.json, which everything exported of it carries."""
        return (self.task_dir / RESULT_FILE).stat().st_mode & 0o777 if self.result else None

    @property
    def cost_usd(self) -> float | None:
        if "cost_usd" in self.raw:
            return self.raw["cost_usd"]
        final = self.trajectory.final_metrics if self.trajectory else None
        return final.total_cost_usd if final else None


def kept_attempts(run_dir: Path) -> Iterator[KeptAttempt]:
    """Every attempt folder of `run_dir/tasks/`, in name order."""
    for task_dir in sorted(p for p in (run_dir / "tasks").iterdir() if p.is_dir()):
        result = result_if_readable(task_dir / RESULT_FILE)
        score, withheld = counted_score(result) if result else (None, NO_RESULT)
        if score is None and result is not None and result.failure_classification:
            withheld = f"{result.status}: {result.failure_classification}"
        yield KeptAttempt(task_dir, result, _raw_result(task_dir), _trajectory(task_dir), score,
                          None if score is not None else withheld)


def _trajectory(task_dir: Path) -> Trajectory | None:
    try:
        return Trajectory.model_validate_json((task_dir / TRAJECTORY_FILE).read_bytes())
    except (FileNotFoundError, ValueError):  # absent, torn, or not a trajectory
        return None


def _raw_result(task_dir: Path) -> dict:
    try:
        value = orjson.loads((task_dir / RESULT_FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _repeat_of(folder: str) -> int:
    _, sep, number = folder.rpartition(".r")
    return int(number) if sep and number.isdigit() else 1
