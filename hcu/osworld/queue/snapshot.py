"""The queue's figures now, as one record: what QUEUE_STATUS.md shows, what `queue-status.json` beside it holds
for `ctl status` and the viewer, and what the terminal view draws. Built from the queue's own state at each
status write (at most once a second), never from a re-read of the run's files (the phases of running attempts
come from their progress.json, which the status has always read).

The score so far is tallied as repeats become final: the score that counts (errors.counted_score) of each
repeat scored, with the units an interval is drawn over (each scored attempt's score; with repeats, each task's
mean over its scored repeats, so that a task's repeats are resampled together). The interval itself is the
summary's (hcu/osworld/summary/stats.py), drawn by whoever shows it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field, ValidationError

from hcu.osworld.errors import class_of, counted_score
from hcu.osworld.quota.forecast import Forecast
from hcu.osworld.quota.report import bound_of
from hcu.osworld.quota.stats import Range
from hcu.osworld.records.result import TaskResult
from hcu.record_io import Record

SNAPSHOT_FILE = "queue-status.json"
RECENT_FINISHES = 10
QueueState = Literal["running", "paused", "draining", "stopping", "done", "drained", "stopped", "interrupted"]
"""running/paused/draining/stopping (launches stopped for good, attempts still running): a queue is at work;
done, drained, stopped (launches stopped, nothing running) and interrupted (Ctrl-C, SIGTERM, an error): it
exited."""
WORKING = frozenset({"running", "paused", "draining", "stopping"})


class ActiveFigure(BaseModel):
    key: str
    attempt: int
    pid: int
    phase: str
    """From the attempt's progress.json ("launching" before it writes one)."""
    phase_since: float | None
    started_at: float
    adopted: bool
    node: str | None


class FinishFigure(BaseModel):
    key: str
    attempt: int
    outcome: str
    """"finished", "set aside (<class>)", "out of attempts", ..."""
    at: float
    duration_sec: float | None
    score: float | None = None
    """The score that counts, for a finished attempt that has one."""


class ScoreFigures(BaseModel):
    """The score so far: over the repeats scored until now."""

    planned: int
    """Every repeat of every config task."""
    scored: int
    withheld: int
    """Repeats final without a usable score."""
    mean: float | None
    """The mean of the units (None before the first score)."""
    units: list[tuple[float, int]] = []
    """(value, how many units have it): attempts' scores, or with repeats the tasks' means over their scored
    repeats."""
    clustered: bool = False
    """True with repeats: the units are tasks (the summary's cluster bootstrap), else attempts."""

    @property
    def coverage(self) -> float:
        return self.scored / self.planned if self.planned else 0.0


class RateLimitFigures(BaseModel):
    launches_paused_until: float = 0.0
    """After an attempt that ended rate-limited the queue holds launches until then (0: it does not)."""
    waited_requests: int = 0
    """Requests the gateway logged in the last `window_sec` that had waited on a rate limit."""
    waited_sec: float = 0.0
    window_sec: float = 60.0


class ForecastFigures(BaseModel):
    eta: Range
    tokens_to_go: Range
    cost_to_go: Range
    concurrency: float | None
    binding: str | None
    bound: str | None = None
    """What the ETA is bound by: the attempts' length at `concurrency`, or the quota (None: unknown)."""
    lines: list[str]
    """QUEUE_STATUS.md's forecast lines."""

    @classmethod
    def of(cls, forecast: Forecast, lines: list[str]) -> ForecastFigures:
        return cls(eta=forecast.wall_time_sec, tokens_to_go=forecast.tokens_total, cost_to_go=forecast.cost_usd,
                   concurrency=forecast.concurrency, binding=forecast.concurrency_binding, bound=bound_of(forecast),
                   lines=lines)


class QueueSnapshot(Record):
    run_id: str
    pid: int
    host: str
    started_at: float
    updated_at: float
    state: QueueState
    note: str = ""
    planned: int
    final: dict[str, int]
    """Repeats final by how: finished, exhausted (out of attempts)."""
    pending: int
    running: int
    phases: dict[str, int]
    """Running attempts by phase (the phase's name, without what it waits for)."""
    active: list[ActiveFigure] = Field(default=[], exclude=True)
    """Every running attempt (QUEUE_STATUS.md lists them; the JSON keeps the counts by phase)."""
    set_aside: int
    """Attempts under retries/ (each is run again, while attempts are left)."""
    retries: list[str] = Field(default=[], exclude=True)
    recent: list[FinishFigure]
    limit: int
    """How many attempts the queue lets run at once now."""
    limit_reason: str
    slots: int | None
    """What the executor can hold now (None: no limit of its own)."""
    settings: dict[str, Any]
    """The current values of the keys `ctl set` may change."""
    set_by_ctl: list[str]
    paused: bool
    draining: bool
    held: str
    """Why launches are held now (the gateway gate, a pause), or why they stopped for good; empty: they go."""
    rate_limits: RateLimitFigures
    spend_usd: float | None
    """Priced spend from the token log (None: the config has no prices)."""
    spend_line: str
    tokens: int
    """Input + output tokens of the run's token-log rows so far."""
    forecast: ForecastFigures | None
    score: ScoreFigures

    @property
    def done(self) -> int:
        return sum(self.final.values())


class ScoreTally:
    """The counted score of every final repeat, kept as repeats become final (a repeat seen twice counts once)."""

    def __init__(self, planned: int, clustered: bool) -> None:
        self.planned, self.clustered = planned, clustered
        self.scores: dict[tuple[str, int], float | None] = {}
        self._figures: ScoreFigures | None = None

    def add(self, task_id: str, repeat: int, result: TaskResult | None) -> float | None:
        """Tally a final repeat's result (None: it has none, out of attempts); returns its counted score."""
        score = None if result is None else counted_score(
            class_of(result.failure_classification, result.status), result.termination_reason, result.score)
        self.scores[(task_id, repeat)] = score
        self._figures = None
        return score

    def figures(self) -> ScoreFigures:
        if self._figures is None:
            self._figures = self._count()
        return self._figures

    def _count(self) -> ScoreFigures:
        scored = {key: score for key, score in self.scores.items() if score is not None}
        if self.clustered:
            by_task: dict[str, list[float]] = {}
            for (task_id, _), score in scored.items():
                by_task.setdefault(task_id, []).append(score)
            units = Counter(sum(scores) / len(scores) for scores in by_task.values())
        else:
            units = Counter(scored.values())
        count = sum(units.values())
        mean = sum(value * n for value, n in units.items()) / count if count else None
        return ScoreFigures(planned=self.planned, scored=len(scored), withheld=len(self.scores) - len(scored),
                            mean=mean, units=sorted(units.items()), clustered=self.clustered)


def snapshot_path(run_dir: Path) -> Path:
    return run_dir / SNAPSHOT_FILE


def read_snapshot(run_dir: Path) -> QueueSnapshot | None:
    """The figures the queue last wrote; None when there are none or they do not read (another version's)."""
    try:
        return QueueSnapshot.model_validate(orjson.loads(snapshot_path(run_dir).read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValidationError):
        return None
