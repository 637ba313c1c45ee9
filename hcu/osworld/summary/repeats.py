"""A task's repeats as one score, and what repeats tell about a run: pass@k, pass^k and the two variance terms.

Policy ("mean"): a task's score is the mean of its scored repeats, never the best of them; a task is scored only
when every repeat its config asks for has a usable score (else it is withheld, and the bounds count each
missing repeat as 0 or 1). Success for pass@k is a score of 1.0.

Estimators, with n scored repeats of which c succeeded (unbiased for any k <= n):
    pass@k = 1 - C(n - c, k) / C(n, k)   (at least one of k attempts succeeds)
    pass^k = C(c, k) / C(n, k)           (all k attempts succeed)

Variance terms of the run's score S = mean over n tasks of the task means m_i (task i has k_i repeats with
sample variance s_i^2 across them):
    run-to-run sd  = sqrt(sum_i s_i^2 / k_i) / n
    task-list sd   = sqrt(max(0, var(m) - mean_i(s_i^2 / k_i)) / n)
They add in quadrature to the standard error sqrt(var(m) / n). The first is what another campaign of the same
tasks would move the score by (it shrinks with sqrt(k)); the second is the luck of which tasks are in the
list (repeats do not touch it). A task with one repeat borrows the pooled s^2 of the tasks with more; with no
task repeated the run-to-run term is unknown and the task-list term holds both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.parts import TaskRepeats
from hcu.osworld.summary.rows import AttemptRow


def exact_sum(scores: Sequence[float]) -> Fraction:
    """The sum of scores as an exact fraction: the same whatever order the repeats come in (a float sum is not,
    so two runs holding the same scores in another order would differ in the last bit)."""
    return sum((Fraction(score) for score in scores), Fraction(0))


def task_mean(scores: Sequence[float]) -> float | None:
    """The mean of a task's scored repeats, exactly rounded (order does not matter); None without one."""
    return float(exact_sum(scores) / len(scores)) if scores else None


def means_differ(scores: Sequence[float], other: Sequence[float]) -> bool:
    """Whether two tasks' means over their scored repeats differ (compared exactly): what makes a task
    discordant between two runs."""
    return exact_sum(scores) * len(other) != exact_sum(other) * len(scores)


@dataclass(frozen=True)
class TaskScores:
    """One config task and the attempts that score its repeats, with its figures worked out once."""

    task_id: str
    domain: str
    stratum: str
    repeats: int
    """How many repeats the config asks for."""
    rows: list[AttemptRow]
    scores: list[float]
    """The usable scores among its repeats."""
    mean: float | None
    """The mean of the scored repeats (whether or not all are in)."""
    successes: int
    lower: float
    """The task's score with each missing repeat counted 0."""
    missing: float
    """The share of its repeats without a usable score (the upper bound counts them 1)."""

    @classmethod
    def of(cls, task_id: str, stratum: str, repeats: int, rows: list[AttemptRow]) -> TaskScores:
        scores = [row.score for row in rows if row.score is not None]
        return cls(task_id, rows[0].domain if rows else "unknown", stratum, repeats, rows, scores,
                   task_mean(scores), sum(1 for score in scores if score == 1.0),
                   float(exact_sum(scores) / repeats), (repeats - len(scores)) / repeats)

    @property
    def complete(self) -> bool:
        return len(self.scores) == self.repeats

    def within_variance(self) -> float | None:
        """Sample variance of the scored repeats (None below two)."""
        scores = self.scores
        if len(scores) < 2:
            return None
        mean = sum(scores) / len(scores)
        return sum((s - mean) ** 2 for s in scores) / (len(scores) - 1)


def task_scores(config: RunConfig, rows: Sequence[AttemptRow]) -> list[TaskScores]:
    """The config's tasks in order, each with its repeat rows."""
    grouped: dict[str, list[AttemptRow]] = {task.id: [] for task in config.tasks}
    for row in rows:
        grouped[row.task_id].append(row)
    return [TaskScores.of(task.id, task.stratum or "", config.repeats_of(task), grouped[task.id])
            for task in config.tasks]


def run_k(tasks: Sequence[TaskScores]) -> int:
    """The k every task is meant to have (the fewest repeats any task asks for)."""
    return min(task.repeats for task in tasks)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """P(at least one of k attempts succeeds), unbiased from n attempts with c successes; None when n < k."""
    if n < k or k < 1:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """P(all k attempts succeed), unbiased from n attempts with c successes; None when n < k."""
    if n < k or k < 1:
        return None
    return math.comb(c, k) / math.comb(n, k)


def per_task(tasks: Sequence[TaskScores], k: int, cost_usd: dict[str, float | None]) -> list[TaskRepeats]:
    """summary.json's `per_task` rows; `cost_usd`: each task's scored repeats' cost."""
    return [TaskRepeats(task_id=t.task_id, domain=t.domain, repeats_scored=len(t.scores), mean=t.mean,
                        successes=t.successes, pass_at_k=pass_at_k(len(t.scores), t.successes, k),
                        pass_hat_k=pass_hat_k(len(t.scores), t.successes, k), cost_usd=cost_usd[t.task_id])
            for t in tasks]


def run_pass(values: Sequence[float | None]) -> float | None:
    """The mean of a per-task estimator over the config's tasks; None when any task has too few repeats."""
    if any(value is None for value in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class VarianceTerms:
    run_to_run_sd: float | None
    task_list_sd: float | None
    tasks: int
    """How many tasks (those with every repeat scored) the terms are estimated on."""


def variance_terms(tasks: Sequence[TaskScores]) -> VarianceTerms:
    """Both terms of the score's standard error, on the tasks whose repeats are all scored."""
    done = [task for task in tasks if task.complete]
    n = len(done)
    if n < 2:
        return VarianceTerms(None, None, n)
    means = [float(task.mean) for task in done]  # type: ignore[arg-type]
    grand = sum(means) / n
    between_and_within = sum((m - grand) ** 2 for m in means) / (n - 1)
    within = [task.within_variance() for task in done]
    known = [v for v in within if v is not None]
    if not known:
        return VarianceTerms(None, math.sqrt(between_and_within / n), n)
    pooled = sum(known) / len(known)
    noise = [(pooled if v is None else v) / task.repeats for v, task in zip(within, done, strict=True)]
    between = max(0.0, between_and_within - sum(noise) / n)
    return VarianceTerms(math.sqrt(sum(noise)) / n, math.sqrt(between / n), n)
