"""The parts of summary.json (`model.RunSummary`): intervals, group figures, spend, the lists of tasks it names,
comparisons and the do-nothing baseline. Each is a record of its own so that summarize, the viewer and the exports
share one definition."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from hcu.defaults import BenchmarkVersion

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


class RegradedScore(SummaryPart):
    """One repeat scored by a regrade of its kept final desktop (its regrade.json)."""

    task_id: str
    """The repeat's folder name in tasks/."""
    first_score: float | None
    """The score of its first grading (result.json; None: withheld)."""
    score: float | None
    """The regraded score, the one that counts (None: withheld: the evaluator failed again)."""


class Regraded(SummaryPart):
    """Repeats whose kept final desktop was scored again (python -m hcu.osworld.regrade)."""

    attempts: list[RegradedScore]
    """Every regraded repeat, with its first grading beside the score that counts."""
    changed: int
    """How many of them changed score."""
    not_regraded: int
    """Regrades that could not run (the desktop did not restore, the task did not load): their first grading
    stands."""


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
