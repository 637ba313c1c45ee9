"""The do-nothing baseline: which of a run's tasks the official evaluator passes in their untouched state (a canary
sweep's `--run-evaluator` scores, its sweep.json), and the run's figures without them.

A config task
- passes untouched when the sweep evaluated its untouched state and the score is above 0 (a partial score too:
  the agent would get it for nothing);
- fails untouched when that score is 0 (a getter that read nothing leaves OSWorld's score standing, as it does in
  a scored run);
- is unknown otherwise: not in the sweep, not run yet, its setup or evaluation failed, a score that is not a
  number from 0 to 1, or a run of another task set than the sweep's. An unknown task is never assumed to fail
  untouched: it stays in the figures without the tasks passing untouched, and is listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from hcu.defaults import BenchmarkVersion
from hcu.osworld.records.sweep_file import SWEPT_VERSION, SweepFile, SweepTask
from hcu.osworld.summary.groups import group_stats
from hcu.osworld.summary.parts import Baseline, UntouchedTask
from hcu.osworld.summary.repeats import TaskScores

Untouched = Literal["passes", "fails", "unknown"]


def untouched_score(row: SweepTask | None, version: BenchmarkVersion) -> tuple[float | None, str]:
    """(the untouched state's score, why it is unknown) of a task from its sweep row."""
    if version != SWEPT_VERSION:
        return None, f"the sweep scored OSWorld {SWEPT_VERSION} tasks; this run is {version}"
    if row is None:
        return None, "not in the sweep"
    if row.outcome == "not run":
        return None, "the sweep has not run it yet"
    if not row.evaluated or row.score is None:
        return None, f"not evaluated untouched: {row.outcome}" + (f": {row.error}" if row.error else "")
    if not 0.0 <= row.score <= 1.0:  # NaN fails both comparisons
        return None, f"untouched score {row.score}: expected a number from 0 to 1"
    return row.score, ""


def untouched(score: float | None) -> Untouched:
    return "unknown" if score is None else "passes" if score > 0 else "fails"


def _mark(task: TaskScores, row: SweepTask | None, version: BenchmarkVersion) -> UntouchedTask:
    score, why = untouched_score(row, version)
    return UntouchedTask(task_id=task.task_id, domain=task.domain, score=score, why=why)


def baseline_figures(sweep_dir: Path, sweep: SweepFile, tasks: Sequence[TaskScores], version: BenchmarkVersion,
                     repeated: bool) -> Baseline:
    """The baseline of the run's tasks from the sweep; `repeated`: the run has repeats (its interval method)."""
    rows = {row.task_id: row for row in sweep.tasks}
    marks = [_mark(task, rows.get(task.task_id), version) for task in tasks]
    verdicts = [untouched(mark.score) for mark in marks]
    kept = [task for task, verdict in zip(tasks, verdicts, strict=True) if verdict != "passes"]
    return Baseline(
        sweep_dir=str(sweep_dir), sweep_run_id=sweep.run_id, guest=sweep.guest(),
        stand_ins=sweep.stand_ins or any(row.stand_ins for row in sweep.tasks),
        passes_untouched=[mark for mark, verdict in zip(marks, verdicts, strict=True) if verdict == "passes"],
        fails_untouched=verdicts.count("fails"),
        unknown=[mark for mark, verdict in zip(marks, verdicts, strict=True) if verdict == "unknown"],
        without_untouched_passes=group_stats(kept, repeated) if kept else None)


def untouched_of(baseline: Baseline | None, task_id: str) -> tuple[Untouched | None, float | None]:
    """How a config task's untouched state scored, and the score (None, None without a baseline): a task the
    baseline lists neither as passing untouched nor as unknown scored 0."""
    if baseline is None:
        return None, None
    for mark in baseline.passes_untouched:
        if mark.task_id == task_id:
            return "passes", mark.score
    if any(mark.task_id == task_id for mark in baseline.unknown):
        return "unknown", None
    return "fails", 0.0
