"""One row per config task, read from a run directory, with the reference's scoring rules applied.

Rules (OSWORLD.md "Read results"): the denominator is every task in the config; a task that ended on the
budget or the timeout scores 0 even if the evaluator passed it; a task without a usable score (missing
result, evaluator error, runner error, infrastructure failure) is withheld; tokens count only when the
gateway accounted for every generation of the task.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import ValidationError

from hcu.osworld.attempt.result import TaskResult
from hcu.osworld.errors import policy_for
from hcu.osworld.queue.config import RunConfig

ZERO_TERMINATIONS = ("max_model_calls", "timeout")


@dataclass
class TaskRow:
    task_id: str
    domain: str
    stratum: str
    status: str
    """completed, evaluator_error, error, missing or unreadable."""
    evaluator_score: float | None
    score: float | None
    """The score that counts: None when withheld."""
    withheld_reason: str
    termination: str
    failure_class: str
    attempts: int
    model_calls: int | None
    tokens: int | None
    """input + output tokens, only when fully accounted."""
    duration_sec: float | None
    usage_accounted: bool
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    getters_read_nothing: str = ""
    """The getters that read nothing of the state (comma list): the score stands, summary.md lists the task."""
    stand_ins: bool = False

    @property
    def valid(self) -> bool:
        return self.score is not None


def counted_score(result: TaskResult) -> tuple[float | None, str]:
    """(score, why withheld) for a readable result."""
    if result.status != "completed":
        return None, result.status
    policy = policy_for(result.failure_classification)
    if policy is not None and policy.infrastructure:
        return None, f"infrastructure failure ({result.failure_classification})"
    if result.termination_reason in ZERO_TERMINATIONS:
        return 0.0, ""
    if result.score is None:
        return None, "completed without a score"
    return float(result.score), ""


def read_result_and_status(path: str) -> tuple[TaskResult | None, str]:
    """The result and the row status it gives ("completed", "missing" or "unreadable"). Plain string paths and
    pydantic's own JSON parser: 10,000 of these must stay well under a second."""
    try:
        with open(path, "rb") as f:
            return TaskResult.model_validate_json(f.read()), "completed"
    except FileNotFoundError:
        return None, "missing"
    except ValidationError:
        return None, "unreadable"


def _duration(result: TaskResult) -> float | None:
    if result.duration_sec is not None:
        return result.duration_sec
    if result.started_at is not None and result.finished_at is not None:
        return result.finished_at - result.started_at
    return None


def task_row(config: RunConfig, tasks_dir: str, index: int, retries: Counter[str]) -> TaskRow:
    task = config.tasks[index]
    result, status = read_result_and_status(os.path.join(tasks_dir, task.id, "result.json"))
    attempts = retries[task.id] + (1 if result is not None or os.path.isdir(os.path.join(tasks_dir, task.id))
                                   else 0)
    domain = config.domain_of(task) or (result.task_domain if result else None) or "unknown"
    row = TaskRow(task_id=task.id, domain=domain, stratum=task.stratum or "", status=status,
                  evaluator_score=None, score=None, withheld_reason=status, termination="", failure_class="",
                  attempts=attempts, model_calls=None, tokens=None, duration_sec=None, usage_accounted=False)
    if result is None:
        return row
    row.status = result.status
    # the evaluator's own score; a minimal result.json carries only `score`
    row.evaluator_score = result.evaluator_score if result.evaluator_score is not None else result.score
    row.score, row.withheld_reason = counted_score(result)
    row.termination = result.termination_reason or ""
    row.failure_class = result.failure_classification or ""
    row.duration_sec = _duration(result)
    row.getters_read_nothing = ", ".join(g.getter for g in result.getters_read_nothing)
    row.stand_ins = result.stand_ins
    usage = result.usage
    if usage is not None:
        row.model_calls, row.usage_accounted = usage.model_calls, usage.fully_accounted
        if usage.fully_accounted:
            row.input_tokens, row.output_tokens = usage.input_tokens, usage.output_tokens
            row.cached_input_tokens, row.reasoning_tokens = usage.cached_input_tokens, usage.reasoning_tokens
            row.tokens = usage.input_tokens + usage.output_tokens
    return row


def retry_dirs(run_dir: Path) -> list[os.DirEntry[str]]:
    try:
        return [entry for entry in os.scandir(run_dir / "retries") if entry.is_dir()]
    except FileNotFoundError:
        return []


def retry_counts(entries: list[os.DirEntry[str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for entry in entries:
        task_id, _, number = entry.name.rpartition("-")
        if number.isdigit():
            counts[task_id] += 1
    return counts


def retry_machine_sec(entries: list[os.DirEntry[str]]) -> tuple[float, int]:
    """Machine time of set-aside attempts: their result's duration, or lease start to the move; also how
    many attempts had neither."""
    total, unknown = 0.0, 0
    for entry in entries:
        base = Path(entry.path)
        result, _ = read_result_and_status(os.path.join(entry.path, "result.json"))
        seconds = _duration(result) if result is not None else None
        if seconds is None:
            try:
                started = orjson.loads((base / "attempt.json").read_bytes())["started_at"]
                seconds = orjson.loads((base / "retry.json").read_bytes())["moved_at"] - started
            except (FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError):
                seconds = None
        if seconds is None:
            unknown += 1
        else:
            total += seconds
    return total, unknown


def load_rows(config: RunConfig, run_dir: Path) -> tuple[list[TaskRow], float, int]:
    """Rows for every config task, plus machine seconds spent on retries and attempts of unknown length."""
    entries = retry_dirs(run_dir)
    counts = retry_counts(entries)
    tasks_dir = str(run_dir / "tasks")
    rows = [task_row(config, tasks_dir, index, counts) for index in range(len(config.tasks))]
    retry_sec, unknown = retry_machine_sec(entries)
    return rows, retry_sec, unknown
