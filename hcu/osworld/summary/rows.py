"""One row per repeat of every config task (`tasks/<task>/`, `tasks/<task>.r<n>/`), read from a run directory,
with the reference's scoring rules applied.

Rules (applied through the error table `hcu.osworld.errors`): the denominator is every repeat of every task in
the config; an attempt that ended on the budget or the timeout scores 0 even if the evaluator passed it or then
failed; one without a usable score (missing result, evaluator error, runner error, infrastructure failure) is
withheld; tokens count only when the gateway accounted for every generation.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import ValidationError

from hcu.osworld import errors
from hcu.osworld.records.identity import repeat_key
from hcu.osworld.records.layout import LEASE_FILE, REGRADE_FILE, RESULT_FILE
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.records.result import TaskResult, Usage
from hcu.osworld.run_config import RunConfig


@dataclass
class AttemptRow:
    """The attempt in tasks/ of one repeat of one task: the one that is scored."""

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
    ended_as: str = ""
    """How the attempt in tasks/ ended: its class, "clean", or "no result"; empty when there is none."""
    repeat: int = 1
    cost_usd: float | None = None
    """What the attempt cost (result.json); None when unknown or when no attempt ran."""
    ran: bool = False
    """An attempt left a result.json (readable or not): it ran, and spent."""
    regrade: Regrade | None = None
    """Its kept final desktop's regrade (regrade.json): when it ran, `score` is the regraded one."""
    first_score: float | None = None
    """The score of its first grading, when a regrade replaced it."""

    @property
    def valid(self) -> bool:
        return self.score is not None

    @property
    def key(self) -> str:
        return repeat_key(self.task_id, self.repeat)


def failure_class(result: TaskResult) -> str | None:
    """The result's class (errors.class_of)."""
    return errors.class_of(result.failure_classification, result.status)


def counted_score(result: TaskResult) -> tuple[float | None, str]:
    """(score, why withheld) for a readable result, by the error table (errors.counted_score)."""
    score = errors.counted_score(failure_class(result), result.termination_reason, result.score)
    if score is not None:
        return float(score), ""
    return None, result.status if result.status != "completed" else "completed without a score"


def score_problem(result: TaskResult) -> str | None:
    """Why a result's scores cannot be counted: NaN, infinite or outside [0, 1] (a foreign or broken writer).
    Such a result is read as unreadable: withheld, never averaged in."""
    for name in ("score", "evaluator_score"):
        value = getattr(result, name)
        if value is not None and not 0.0 <= value <= 1.0:  # NaN fails both comparisons
            return f"{name} {value}: expected a number from 0 to 1"
    return None


def read_result_and_status(path: str) -> tuple[TaskResult | None, str, str]:
    """The result, the row status it gives ("completed", "missing" or "unreadable") and why it is unreadable.
    Plain string paths and pydantic's own JSON parser: 10,000 of these must stay well under a second."""
    try:
        with open(path, "rb") as f:
            result = TaskResult.model_validate_json(f.read())
    except FileNotFoundError:
        return None, "missing", "missing"
    except ValidationError:
        return None, "unreadable", "unreadable"
    problem = score_problem(result)
    if problem is not None:
        return None, "unreadable", f"unreadable: {problem}"
    return result, "completed", ""


def _duration(result: TaskResult) -> float | None:
    if result.duration_sec is not None:
        return result.duration_sec
    if result.started_at is not None and result.finished_at is not None:
        return result.finished_at - result.started_at
    return None


def attempt_row(config: RunConfig, tasks_dir: str, index: int, repeat: int, retries: Counter[str]) -> AttemptRow:
    task = config.tasks[index]
    key = repeat_key(task.id, repeat)
    result, status, why = read_result_and_status(os.path.join(tasks_dir, key, RESULT_FILE))
    current = result is not None or os.path.isdir(os.path.join(tasks_dir, key))
    domain = config.domain_of(task) or (result.task_domain if result else None) or "unknown"
    row = AttemptRow(task_id=task.id, domain=domain, stratum=task.stratum or "", status=status,
                     evaluator_score=None, score=None, withheld_reason=why, termination="", failure_class="",
                     attempts=retries[key] + current, model_calls=None, tokens=None, duration_sec=None,
                     usage_accounted=False, ended_as="no result" if current else "", repeat=repeat,
                     ran=status != "missing")
    if result is None:
        return row
    row.status, row.cost_usd = result.status, result.cost_usd
    # the evaluator's own score; a minimal result.json carries only `score`
    row.evaluator_score = result.evaluator_score if result.evaluator_score is not None else result.score
    row.score, row.withheld_reason = counted_score(result)
    row.termination = result.termination_reason or ""
    row.failure_class = failure_class(result) or ""
    row.ended_as = row.failure_class or "clean"
    row.duration_sec = _duration(result)
    row.getters_read_nothing = ", ".join(g.getter for g in result.getters_read_nothing)
    row.stand_ins = result.stand_ins
    _regraded(row, os.path.join(tasks_dir, key, REGRADE_FILE))
    usage = result.usage
    if usage is not None:
        row.model_calls, row.usage_accounted = usage.model_calls, usage.fully_accounted
        if usage.fully_accounted:
            row.input_tokens, row.output_tokens = usage.input_tokens, usage.output_tokens
            row.cached_input_tokens, row.reasoning_tokens = usage.cached_input_tokens, usage.reasoning_tokens
            row.tokens = usage.input_tokens + usage.output_tokens
    return row


def _regraded(row: AttemptRow, path: str) -> None:
    """A regrade that ran replaces the first grading's score (completed) or withholds it (the evaluator failed
    again); one that could not run leaves the first grading standing."""
    try:
        with open(path, "rb") as f:
            row.regrade = Regrade.model_validate_json(f.read())
    except (FileNotFoundError, ValidationError):
        return
    if row.regrade.status == "error":
        return
    row.first_score, row.score = row.score, row.regrade.score_after
    row.evaluator_score = row.regrade.evaluator_score
    row.withheld_reason = "" if row.score is not None else "regrade: evaluator_error"


def retry_dirs(run_dir: Path) -> list[os.DirEntry[str]]:
    try:
        return [entry for entry in os.scandir(run_dir / "retries") if entry.is_dir()]
    except FileNotFoundError:
        return []


def retry_counts(entries: list[os.DirEntry[str]]) -> Counter[str]:
    """Set-aside attempts per repeat, by key (retries/<key>-<n>/)."""
    counts: Counter[str] = Counter()
    for entry in entries:
        key, _, number = entry.name.rpartition("-")
        if number.isdigit():
            counts[key] += 1
    return counts


@dataclass
class RetriedAttempt:
    """An attempt set aside under retries/: never scored, but its machine time and tokens were spent."""

    name: str
    failure_class: str
    duration_sec: float | None
    usage: Usage | None
    cost_usd: float | None = None
    """From its result.json, else what the queue priced its rows at when it set it aside; None: unknown."""


def read_retried(entry: os.DirEntry[str]) -> RetriedAttempt:
    """Class, length, usage and cost of a set-aside attempt: from its result.json, else its lease and retry
    note."""
    base = Path(entry.path)
    result, _, _ = read_result_and_status(os.path.join(entry.path, RESULT_FILE))
    complete = result is not None and failure_class(result) and result.cost_usd is not None
    if complete and result is not None and (seconds := _duration(result)) is not None:
        return RetriedAttempt(entry.name, str(failure_class(result)), seconds, result.usage, result.cost_usd)
    note = _json_or_empty(base / "retry.json")
    seconds = _duration(result) if result is not None else None
    if seconds is None:
        started, moved = _json_or_empty(base / LEASE_FILE).get("started_at"), note.get("moved_at")
        if isinstance(started, (int, float)) and isinstance(moved, (int, float)):
            seconds = moved - started
    cls = (failure_class(result) if result is not None else None) or note.get("failure_classification")
    noted = note.get("cost_usd")
    cost = result.cost_usd if result is not None and result.cost_usd is not None else (
        float(noted) if isinstance(noted, (int, float)) else None)
    return RetriedAttempt(entry.name, str(cls or "unknown"), seconds, result.usage if result is not None else None,
                          cost)


def _json_or_empty(path: Path) -> dict:
    try:
        value = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def load_rows(config: RunConfig, run_dir: Path) -> tuple[list[AttemptRow], list[RetriedAttempt]]:
    """Rows for every repeat of every config task (task by task, repeats in order), and every attempt set aside
    under retries/."""
    entries = retry_dirs(run_dir)
    counts = retry_counts(entries)
    tasks_dir = str(run_dir / "tasks")
    rows = [attempt_row(config, tasks_dir, index, repeat, counts)
            for index, task in enumerate(config.tasks) for repeat in range(1, config.repeats_of(task) + 1)]
    return rows, [read_retried(entry) for entry in entries]
