"""Intervals for panel scores: Wilson for pass/fail, a seeded bootstrap for partial credit, the cluster
bootstrap over tasks with their repeats, and the paired difference of two runs on the same tasks.

Wilson and the plain bootstrap are over the task list: how far a perfectly run single pass could still be from
the model's true rate by luck of which tasks landed. The cluster bootstrap resamples tasks and takes each
task's repeats with it, so with repeats its interval holds the run-to-run noise too.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hcu.osworld.summary.parts import Interval

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261130
"""Fixed, so the same run directory always gives the same interval."""


def is_binary(scores: Sequence[float]) -> bool:
    return all(score in (0.0, 1.0) for score in scores)


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """Wilson score interval for successes/n (sound at 0 %, 100 % and small n, unlike the Wald interval)."""
    if n == 0:
        return Interval(method="wilson", low=0.0, high=1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the edges, not 1 - 1e-16
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(method="wilson", low=low, high=high)


def bootstrap_mean(scores: Sequence[float], seed: int = BOOTSTRAP_SEED,
                   resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Percentile bootstrap of the mean. Resampling n scores with replacement is a multinomial draw over the
    distinct score values, so the cost depends on how many distinct values there are, not on n."""
    if not scores:
        return Interval(method="bootstrap", low=0.0, high=1.0)
    counts = Counter(scores)
    levels = np.array(sorted(counts))
    weights = np.array([counts[level] for level in sorted(counts)], dtype=float) / len(scores)
    draws = np.random.default_rng(seed).multinomial(len(scores), weights, size=resamples)
    means = draws @ levels / len(scores)
    low, high = np.quantile(means, [0.025, 0.975])
    return Interval(method="bootstrap", low=float(low), high=float(high))


def cluster_bootstrap(task_scores: Sequence[float], seed: int = BOOTSTRAP_SEED,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Percentile bootstrap of a run's score that resamples tasks, each with all its repeats: `task_scores` are
    the tasks' means over their repeats, so a resampled task brings its repeats' spread along. Seeded: the same
    run directory always gives the same interval."""
    drawn = bootstrap_mean(task_scores, seed, resamples)
    return Interval(method="cluster bootstrap", low=drawn.low, high=drawn.high)


def mean_interval(scores: Sequence[float]) -> Interval:
    """95 % interval of a mean score: Wilson when every score is 0 or 1, bootstrap otherwise."""
    if is_binary(scores):
        return wilson(sum(1 for score in scores if score == 1.0), len(scores))
    return bootstrap_mean(scores)


@dataclass(frozen=True)
class PairedDifference:
    tasks: int
    mean: float
    interval: Interval | None
    """None below two pairs: no spread to estimate."""


def paired_difference(first: Sequence[float], second: Sequence[float]) -> PairedDifference:
    """Mean of per-task differences with a normal 95 % interval. Tasks both runs score alike contribute zero;
    the width is set by the discordant tasks (about 1.96*sqrt(d)/n for d discordant pass/fail pairs)."""
    diffs = [a - b for a, b in zip(first, second, strict=True)]
    n = len(diffs)
    if n == 0:
        return PairedDifference(0, 0.0, None)
    mean = sum(diffs) / n
    if n < 2:
        return PairedDifference(n, mean, None)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return PairedDifference(n, mean, Interval(method="paired normal", low=mean - half, high=mean + half))
