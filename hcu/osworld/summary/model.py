"""summary.json as one pydantic model: summarize builds a `RunSummary` and writes it; the viewer and the
comparison read summary.json back through it.

Versions. Every key summarize ever wrote is still written, with the same meaning, so a summary.json from before
this model (no `schema_version`) reads as version 1. Keys added after the first summarize have a default (None,
or an empty list or mapping) so that older files read; `model_fields_set` tells a key the file had from one it
did not. A file of a newer `schema_version` is refused in one line (its keys may mean something else); keys a
newer summarize added without changing the version are returned apart by `parse_summary`, for the viewer to
show as they are. A new statistic is a new field here with a default: see "Adding a summary statistic" in
docs/contributing.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from hcu.flags import describe_error
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.summary.parts import (
    SCHEMA_VERSION,
    Baseline,
    ClassCount,
    ClusterBootstrapInterval,
    Comparison,
    GroupFigures,
    Interval,
    RateLimitWaits,
    ReadNothingTask,
    Regraded,
    RetriedSpend,
    RunIdentity,
    ScoreInterval,
    TaskRepeats,
    TokenTotals,
    WastedSpend,
    WithheldTask,
)


class RunSummary(GroupFigures, RunIdentity):
    """summary.json. Field order is the file's key order: what ran, the run's group figures, then the rest."""

    ci95: ScoreInterval
    """The score's 95% interval: Wilson or bootstrap over tasks; with repeats, the cluster bootstrap's."""
    binary_ci95: Interval
    """95% interval of binary_rate_lower_bound."""
    statuses: dict[str, int]
    """Repeats by the status of their result (completed, evaluator_error, error, missing, unreadable)."""
    terminations: dict[str, int]
    """Repeats by how their attempt ended (completed, timeout, max_model_calls, ...)."""
    failure_classes: dict[str, int]
    """Repeats by the failure class of their attempt in tasks/."""
    zeroed_by_budget_or_timeout: int
    """Repeats scored 0 because the budget or the timeout ended them."""
    zeroed_though_evaluator_passed: int
    """Of those, repeats the evaluator scored above 0."""
    withheld_tasks: list[WithheldTask]
    """Tasks without a usable score for some repeat, with why."""
    read_nothing_tasks: list[ReadNothingTask] = []
    """Repeats scored although a getter read nothing: check these before trusting their zeros."""
    attempts: int
    """Every attempt of every repeat, retries included."""
    retried_tasks: int
    """Tasks with a repeat that took more than one attempt."""
    attempts_by_class: dict[str, ClassCount] = {}
    """Attempts (tasks/ and retries/) by how they ended, most frequent first."""
    machine_sec: float
    """Attempt durations, retries included (desktop hours, not model time)."""
    machine_sec_per_valid_result: float | None
    """machine_sec over the validly graded attempts."""
    attempts_without_duration: int
    """Attempts whose length is unknown (left out of machine_sec)."""
    model_calls: int
    """Counted generations of the scored attempts."""
    tokens: TokenTotals
    """Tokens of the scored attempts."""
    retried: RetriedSpend | None = None
    """What the attempts set aside under retries/ spent."""
    by_domain: dict[str, GroupFigures]
    """The group figures per OSWorld domain."""
    by_stratum: dict[str, GroupFigures]
    """The group figures per config stratum (tasks without one are left out)."""
    retry_policy: str
    """How infrastructure failures are retried, as the error table states it."""
    repeats: int | None = None
    """k: the repeats every task asks for (the fewest any task entry asks for)."""
    repeat_policy: Literal["mean"] | None = None
    """How repeats make a task's score: their mean, never the best of them."""
    per_task: list[TaskRepeats] = []
    """One row per config task over its repeats."""
    pass_at_k: float | None = None
    """Mean over tasks of pass@k; None while a task has fewer than k scored repeats."""
    pass_hat_k: float | None = None
    """Mean over tasks of pass^k; None while a task has fewer than k scored repeats."""
    run_to_run_sd: float | None = None
    """Standard deviation of the score from run-to-run noise; None without a task with two scored repeats."""
    task_list_sd: float | None = None
    """Standard deviation of the score from which tasks are in the list."""
    cluster_bootstrap_ci95: ClusterBootstrapInterval | None = None
    """95% interval from resampling tasks, each with all its repeats (of the lower bound while tasks are
    withheld)."""
    cost_usd: float | None = None
    """What the run cost, every attempt and retry included; None when any attempt's cost is unknown."""
    cost_per_valid_result_usd: float | None = None
    """cost_usd over the validly graded attempts: read it next to coverage."""
    wasted: WastedSpend | None = None
    """What attempts that gave no valid result spent: tokens, model calls and cost, and their share of the run's."""
    rate_limit_waits: RateLimitWaits | None = None
    """How long the run's requests waited on rate limits, and the part in attempts that gave no valid result."""
    regraded: Regraded | None = None
    """Repeats scored by a regrade of their kept final desktop: the regraded score counts, the first grading is
    beside it."""
    compare: Comparison | None = None
    """Only with --compare (absent from the file otherwise)."""
    baseline: Baseline | None = None
    """The do-nothing baseline beside the score: only with --baseline or the config's `baseline` (absent from the
    file otherwise)."""

    def to_json(self) -> dict[str, Any]:
        """The content of summary.json (`compare` and `baseline` only when there is one)."""
        return self.model_dump(mode="json", exclude={key for key in ("compare", "baseline")
                                                    if getattr(self, key) is None})


class SummaryUnreadable(HcuOSWorldError):
    """A summary.json that does not read as one; the message is one line."""


def parse_summary(value: object) -> tuple[RunSummary, dict[str, Any]]:
    """The summary in a parsed summary.json, and the top-level keys this model does not know (a newer summarize's);
    SummaryUnreadable naming the key when it does not read."""
    if not isinstance(value, dict):
        raise SummaryUnreadable("expected a JSON object")
    version = value.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SummaryUnreadable(f"schema_version: {version!r} is newer than this hcu reads ({SCHEMA_VERSION}): "
                                "a newer summarize wrote it")
    fields = RunSummary.model_fields
    unknown = {key: item for key, item in value.items() if key not in fields}
    try:
        summary = RunSummary.model_validate({key: item for key, item in value.items() if key in fields})
    except ValidationError as exc:
        raise SummaryUnreadable(describe_error(exc)) from None
    return summary, unknown


def unplaced_figures(summary: RunSummary, placed: frozenset[str]) -> list[tuple[str, str, Any]]:
    """(name, description, value) of every field a page has no place of its own for, in file order: a statistic
    added to the model shows wherever summaries are shown without touching the pages. A field the summary does not
    hold (a file from before the statistic) is left out: that summarize did not compute it."""
    return [(name, " ".join((info.description or name).split()).split(". ")[0].rstrip("."), getattr(summary, name))
            for name, info in type(summary).model_fields.items()
            if name not in placed and name in summary.model_fields_set]
