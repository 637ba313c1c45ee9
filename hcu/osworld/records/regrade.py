"""regrade.json: the attempt's kept final desktop scored again by the evaluator of its task file as it is now,
with OSWorld's code as installed now, without the agent and without a model call (hcu.osworld.regrade). Beside
result.json, which keeps the first grading; summarize reports the regraded score where one exists."""

from __future__ import annotations

from typing import Literal

from hcu.osworld.records.result import PhaseTiming, RecordedFailureClass
from hcu.record_io import Record


class Regrade(Record):
    attempt_id: str
    task_id: str
    repeat: int = 1
    status: Literal["completed", "evaluator_error", "error"]
    """completed: the evaluator scored the kept desktop; evaluator_error: it raised or overran (the score is
    withheld, as on a first grading); error: the kept desktop could not be restored or the task not loaded."""
    score_before: float | None
    """The score that counted at the first grading (result.json)."""
    score_after: float | None
    """The score that counts now: the evaluator's, or 0 for an attempt that ended on its budget or timeout; None
    when withheld."""
    evaluator_score: float | None = None
    task_sha256_then: str
    task_sha256_now: str | None = None
    evaluator_sha256_then: str
    evaluator_sha256_now: str | None = None
    desktop_env_now: str | None = None
    """The OSWorld code that scored it now (its `desktop_env` package directory)."""
    failure_classification: RecordedFailureClass | None = None
    failure_message: str | None = None
    regraded_at: float
    duration_sec: float
    phases: list[PhaseTiming] = []

    @property
    def changed(self) -> bool:
        return self.score_before != self.score_after
