"""The records a task attempt leaves on disk: result.json (the outcome) and its parts.

`summarize` must also read result.json files that carry only the reference's fields (`status`, `score`,
`termination_reason`, `usage`), so everything else has a default, and reading tolerates unknown fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from hcu.osworld.errors import POLICIES, FailureClass
from hcu.record_io import Record

Status = Literal["completed", "evaluator_error", "error"]
TerminationReason = Literal["completed", "max_model_calls", "timeout"]
TerminationDetail = Literal["timeout", "no_progress"]
ProtocolWord = Literal["TASK_COMPLETE", "TASK_INFEASIBLE", "ASK_USER"]


def _known_class(value: object) -> object:
    return "runner" if isinstance(value, str) and value not in POLICIES else value


RecordedFailureClass = Annotated[FailureClass, BeforeValidator(_known_class)]
"""A failure class as a stored record holds it. A class this version does not know (a record from another
version) reads as "runner": what `policy_for` makes of it (neither retried nor scored), and the record still
reads."""


class PhaseTiming(BaseModel):
    """One pipeline phase of one attempt."""

    name: str
    started_at: float
    """Unix time the phase started."""
    duration_sec: float
    status: Literal["ok", "failed", "skipped"] = "ok"
    error: str | None = None


class Usage(BaseModel):
    """Model usage of one attempt, read from the gateway's token log rows of its task scope. A result record's part:
    result.json's `usage`, the sum of the scope's `gateway.tokenlog.TokenUsage` rows (Harbor's export renames it
    `AgentUsage`)."""

    model_config = ConfigDict(extra="ignore")

    model_calls: int = 0
    """Counted (successful, complete) generations: what the budget counts."""
    requests: int = 0
    """Every client request the gateway logged, counted or not."""
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    rate_limit_wait_sec: float = 0.0
    fully_accounted: bool = False
    """True when every counted generation carried usage: only then are token totals meaningful."""


class EmptyGetter(BaseModel):
    """A getter that read nothing of the guest's state (None, a failed fetch, an error logged): OSWorld scored
    without it, so the score stands, but summary.md lists the task."""

    getter: str
    reason: str


class TaskResult(Record):
    """result.json: the outcome of one attempt."""

    model_config = ConfigDict(extra="ignore")

    status: Status
    score: float | None = None
    """The score that counts: the evaluator's, or 0 when the budget or the timeout ended the task; None when
    there is none (error, evaluator_error)."""
    evaluator_score: float | None = None
    """What the official evaluator returned, kept even when the termination reason overrides it."""
    termination_reason: TerminationReason | None = None
    termination_detail: TerminationDetail | None = None
    """Which limit a `timeout` termination was: the timeout itself, or the no-progress limit."""
    failure_classification: RecordedFailureClass | None = None
    """A key of `hcu.osworld.errors.POLICIES`, or None for a clean attempt."""
    failure_message: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    """What the attempt's model calls cost, from its token-log rows and the run's `prices`; None when unknown
    (no price for a model its rows name, a generation logged without its tokens, no token log): never 0 then."""

    attempt_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    task_domain: str | None = None
    repeat: int = 1
    """Which scored run of the task this attempt belongs to (results from before repeats are repeat 1)."""
    attempt: int | None = None
    benchmark_version: str | None = None
    agent: str | None = None
    model: str | None = None
    effort: str | None = None
    protocol_word: ProtocolWord | None = None
    """The runner protocol word the agent ended with, if any."""
    rate_limit_resumes: int = 0
    getters_read_nothing: list[EmptyGetter] = []
    """The evaluator's getters that read nothing of the state (by name, with why)."""
    stand_ins: bool = False
    """The task's files were generated stand-ins (offline tests): never part of a scored run."""
    settle_seconds: float | None = None
    """How long the guest was left to settle after the agent's last action, before evaluation."""
    phases: list[PhaseTiming] = []
    started_at: float | None = None
    finished_at: float | None = None
    duration_sec: float | None = None


def result_if_readable(path: Path) -> TaskResult | None:
    """A result.json, or None when it is missing or unreadable (a torn or foreign file is not a result)."""
    try:
        return TaskResult.model_validate(orjson.loads(path.read_bytes()))
    except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
        return None
