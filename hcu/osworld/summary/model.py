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

from pydantic import BaseModel, ConfigDict, ValidationError

from hcu.defaults import BenchmarkVersion
from hcu.flags import describe_error
from hcu.osworld.errors import HcuOSWorldError

SCHEMA_VERSION = 1
"""The layout this code writes and reads. Adding a key does not change it; changing what a key means does."""

IntervalMethod = Literal["wilson", "bootstrap", "cluster bootstrap", "paired normal"]


class SummaryPart(BaseModel):
    """A part of summary.json: unknown keys are refused (a typo never passes), docstrings are descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Interval(SummaryPart):
    """A 95% interval of a mean."""

    method: IntervalMethod
    """Wilson for pass/fail scores, a seeded bootstrap for partial ones, the cluster bootstrap with repeats, a
    normal interval for a paired difference."""
    low: float
    """Lower end, in score units (0 to 1)."""
    high: float
    """Upper end, in score units."""


class ScoreInterval(Interval):
    of: Literal["score", "lower_bound"]
    """The score's interval, or the lower bound's while tasks are withheld."""


class ClusterBootstrapInterval(ScoreInterval):
    resamples: int
    """How many times the tasks were resampled, each with all its repeats."""
    seed: int
    """Fixed, so a run directory always gives the same interval."""


class GroupFigures(SummaryPart):
    """Score, bounds and coverage over a set of tasks (the run, a domain, a stratum); the denominator is every
    repeat of every task in it."""

    tasks: int
    """Config tasks in the set."""
    valid: int
    """Validly graded attempts: repeats with a usable score."""
    withheld: int
    """Tasks with a repeat that lacks a usable score."""
    coverage: float
    """Share of the repeats the config asks for that were validly graded."""
    score: float | None
    """Mean of the task means (each the mean of its repeats); None while a task is withheld."""
    lower_bound: float
    """The score with every missing repeat counted 0."""
    upper_bound: float
    """The score with every missing repeat counted 1."""
    valid_mean: float | None
    """Mean of the task means over the tasks with a scored repeat; None without one."""
    raw_score_sum: float
    """Sum of every usable repeat score."""
    binary_successes: int
    """Repeats scored 1.0."""
    binary_rate: float | None
    """Mean over tasks of each task's share of repeats scored 1.0; None while a task is withheld."""
    binary_rate_lower_bound: float
    """binary_rate with every missing repeat counted as no success."""
    ci95: ScoreInterval | None = None
    """95% interval of the score (of the lower bound while a task is withheld), by the run's method."""


class RunIdentity(SummaryPart):
    """What ran: summary.json's first keys."""

    schema_version: int = SCHEMA_VERSION
    """The layout of this file (absent, and read as 1, in files from before it was written)."""
    run_id: str
    """The run directory's name (the config's run_id)."""
    benchmark_version: BenchmarkVersion
    """The OSWorld task set the run scored."""
    agent: str
    """The agent adapter that ran (the config's `agent`)."""
    model: str | None
    """The model the agent was told to use."""
    effort: str | None
    """The reasoning effort the agent was told to use."""
    scripted_model: bool
    """A scripted upstream stood in for the model: the score checks the harness, not a model."""


class TokenTotals(SummaryPart):
    """Tokens of the scored attempts whose every generation the gateway accounted for."""

    accounted_tasks: int
    """Attempts fully accounted (the others' tokens are left out)."""
    input_tokens: int
    """The whole prompt, cached part included."""
    cached_input_tokens: int
    """The part of the prompt read from the prompt cache."""
    output_tokens: int
    """Output, reasoning included."""
    reasoning_tokens: int
    """The reasoning part of the output."""
    total: int
    """Input plus output."""
    per_valid_result: float | None
    """total over the validly graded attempts among those accounted for."""


class RetriedSpend(SummaryPart):
    """What attempts set aside under retries/ spent: never scored, part of the campaign's cost."""

    attempts: int
    """Attempts set aside under retries/."""
    machine_sec: float
    """Their durations (from their result, else from their lease to when they were set aside)."""
    model_calls: int
    """Counted generations they made."""
    accounted_attempts: int
    """Set-aside attempts whose every generation the gateway accounted for (their tokens are summed)."""
    input_tokens: int
    """The whole prompt, cached part included."""
    cached_input_tokens: int
    """The part of the prompt read from the prompt cache."""
    output_tokens: int
    """Output, reasoning included."""
    reasoning_tokens: int
    """The reasoning part of the output."""
    total: int
    """Input plus output."""
    cost_usd: float | None = None
    """What they cost; None when any one's cost is unknown (or the file is from before costs)."""


class WastedSpend(RetriedSpend):
    """What the attempts that gave no valid result spent (summary/waste.py says which those are): paid for, with
    nothing of it in the score."""

    attempts: int
    """Attempts that ran and gave no valid result: set aside under retries/, or withheld in tasks/."""
    accounted_attempts: int
    """Of them, attempts whose every generation the gateway accounted for (their tokens are summed)."""
    set_aside: int
    """Of them, attempts set aside under retries/ (the figures of `retried`)."""
    withheld: int
    """Of them, attempts in tasks/ whose result is withheld (an evaluator or runner error, an unreadable result, an
    infrastructure failure out of retries)."""
    cost_unknown: str = ""
    """Why cost_usd is None ("" when it is known)."""
    share_of_cost: float | None = None
    """cost_usd over the run's cost_usd; None when either is unknown or the run cost nothing."""
    share_of_tokens: float | None = None
    """total over the tokens of every fully accounted attempt of the run (tasks/ and retries/); None without any."""
    share_of_model_calls: float | None = None
    """model_calls over the model calls of every attempt of the run (tasks/ and retries/); None without any."""


class RateLimitWaits(SummaryPart):
    """Time the run's model requests waited on rate limits: the token log's rate_limit_wait_sec, summed over the
    requests of every attempt of the run (tasks/ and retries/; attempts waiting at once each count)."""

    wait_sec: float | None
    """Seconds waited; None when unknown (`unknown` says why)."""
    without_valid_result_sec: float | None
    """The part of wait_sec in attempts that gave no valid result."""
    requests: int
    """The run's requests in the token log."""
    requests_waited: int
    """Of them, requests that waited on a rate limit."""
    unknown: str = ""
    """Why wait_sec is None ("" when it is known)."""


class WithheldTask(SummaryPart):
    task_id: str
    """The config task."""
    reason: str
    """Why it has no usable score (per repeat, when it has several)."""


class ReadNothingTask(SummaryPart):
    """A repeat scored although one of its evaluator's getters read nothing of the guest's state."""

    task_id: str
    """The repeat's folder name in tasks/."""
    getters: str
    """Comma list of the getters that read nothing."""
    score: float | None
    """The score that counts for the repeat (None when withheld)."""


class ClassCount(SummaryPart):
    """Attempts that ended in one failure class (or "clean"), and what the error table does with the class."""

    attempts: int
    """Attempts in tasks/ and retries/ that ended so."""
    retried: bool | None
    """Whether the error table retries the class; None: a class this hcu does not know."""
    scored: bool | None
    """Whether the error table scores the class; None: a class this hcu does not know."""


class TaskRepeats(SummaryPart):
    """One config task over its repeats."""

    task_id: str
    """The config task."""
    domain: str
    """Its OSWorld domain ("unknown" when neither the config nor a result names one)."""
    repeats_scored: int
    """Repeats with a usable score."""
    mean: float | None
    """Mean of its scored repeats (whether or not all are in)."""
    successes: int
    """Scored repeats with score 1.0."""
    pass_at_k: float | None
    """Unbiased P(at least one of k attempts succeeds); None below k scored repeats."""
    pass_hat_k: float | None
    """Unbiased P(all k attempts succeed); None below k scored repeats."""
    cost_usd: float | None = None
    """What its scored repeats cost; None when unknown."""


class DiscordantTask(SummaryPart):
    """A task whose means differ between the two runs."""

    task_id: str
    """The config task."""
    score: float
    """Its mean over its scored repeats in this run."""
    other_score: float
    """Its mean in the other run."""
    repeats: int | None = None
    """Scored repeats behind `score`."""
    other_repeats: int | None = None
    """Scored repeats behind `other_score`."""


class Comparison(SummaryPart):
    """`--compare`: task means paired on the tasks both configs hold and both runs scored in full."""

    other_run_id: str
    """The run compared with."""
    other_run_dir: str
    """Its run directory."""
    this_run_dir: str | None = None
    """This run's directory (for the command that buys repeats of the discordant tasks)."""
    common_tasks: int
    """Tasks both configs hold."""
    paired_tasks: int
    """Of those, tasks both runs scored in full."""
    not_comparable: list[str]
    """Tasks both configs hold that one run did not score in full."""
    discordant: list[DiscordantTask]
    """Paired tasks whose exact means differ: they alone decide the comparison."""
    this_better: int
    """Discordant tasks this run scored higher."""
    other_better: int
    """Discordant tasks the other run scored higher."""
    mean_difference: float
    """Mean of the per-task differences, this run minus the other."""
    ci95: Interval | None
    """Paired normal interval of mean_difference; None below two pairs."""
    sign_settled: bool | None = None
    """The interval excludes 0."""
    score: float | None
    """This run's score (None while a task is withheld)."""
    other_score: float | None
    """The other run's score."""
    rerun_configs: list[str]
    """Configs written by --rerun-discordant."""


class UntouchedTask(SummaryPart):
    """A config task's untouched state as the baseline's sweep scored it."""

    task_id: str
    """The config task."""
    domain: str
    """Its domain in the run."""
    score: float | None
    """The official evaluator's score of the untouched state (setup done, no agent); None when unknown."""
    why: str = ""
    """Why the score is unknown (not in the sweep, not run yet, its setup or evaluation failed, a score that is
    not a number from 0 to 1); empty when it is known."""


class Baseline(SummaryPart):
    """The do-nothing baseline: a canary sweep's scores of each task's untouched state (setup, then the official
    evaluator, no agent). A task the evaluator passes untouched says nothing about the agent."""

    sweep_dir: str
    """The canary sweep's folder."""
    sweep_run_id: str
    """The sweep's run id."""
    guest: str
    """The guest the sweep ran on ("test desktop", or the guest image)."""
    stand_ins: bool
    """The sweep ran on generated stand-in task files: an untouched state may differ from the real task's."""
    passes_untouched: list[UntouchedTask]
    """Config tasks the evaluator scored above 0 in their untouched state."""
    fails_untouched: int
    """Config tasks the evaluator scored 0 in their untouched state."""
    unknown: list[UntouchedTask]
    """Config tasks whose untouched score the sweep does not give, with why: never assumed 0."""
    without_untouched_passes: GroupFigures | None
    """The run's figures over the tasks left once those passing untouched are taken out (tasks of unknown
    untouched score stay in), with the interval by the run's method; None when no task is left."""


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
