"""Score, bounds, coverage and the score's 95% interval over a set of tasks: the run, a domain, a stratum, the
tasks a do-nothing baseline leaves. One computation for all of them, so every group's interval is drawn by the
run's method (Wilson or a bootstrap over tasks; the cluster bootstrap once the run has repeats)."""

from __future__ import annotations

from collections.abc import Sequence

from hcu.osworld.summary.parts import GroupFigures, ScoreInterval
from hcu.osworld.summary.repeats import TaskScores
from hcu.osworld.summary.stats import cluster_bootstrap, mean_interval


def score_interval(tasks: Sequence[TaskScores], repeated: bool) -> ScoreInterval:
    """The 95% interval of the tasks' score, or of their lower bound while one is withheld. A complete task's lower
    bound is its mean, so the lower bounds are what both draw from."""
    of = "lower_bound" if any(not task.complete for task in tasks) else "score"
    lowers = [task.lower for task in tasks]
    drawn = cluster_bootstrap(lowers) if repeated else mean_interval(lowers)
    return ScoreInterval(method=drawn.method, low=drawn.low, high=drawn.high, of=of)


def group_stats(tasks: Sequence[TaskScores], repeated: bool) -> GroupFigures:
    """Score, bounds and coverage over a set of tasks; the denominator is every repeat of every task in it.
    `repeated`: the run has repeats (its interval method is then the cluster bootstrap)."""
    n = len(tasks) or 1
    scores = [score for task in tasks for score in task.scores]
    means = [task.mean for task in tasks if task.mean is not None]
    withheld = sum(1 for task in tasks if not task.complete)
    rates = sum(task.successes / task.repeats for task in tasks)
    lower = sum(task.lower for task in tasks)
    return GroupFigures(
        tasks=len(tasks), valid=len(scores), withheld=withheld,
        coverage=len(scores) / (sum(task.repeats for task in tasks) or 1),
        score=None if withheld else sum(task.mean for task in tasks) / n,  # type: ignore[misc]
        lower_bound=lower / n, upper_bound=(lower + sum(task.missing for task in tasks)) / n,
        valid_mean=sum(means) / len(means) if means else None, raw_score_sum=sum(scores),
        binary_successes=sum(task.successes for task in tasks),
        binary_rate=None if withheld else rates / n, binary_rate_lower_bound=rates / n,
        ci95=score_interval(tasks, repeated))


def grouped(tasks: Sequence[TaskScores], key: str, repeated: bool) -> dict[str, GroupFigures]:
    """The group figures per value of a task's `key` (domain, stratum); tasks without one are left out."""
    groups: dict[str, list[TaskScores]] = {}
    for task in tasks:
        groups.setdefault(getattr(task, key), []).append(task)
    return {name: group_stats(members, repeated) for name, members in sorted(groups.items()) if name}
