"""Figures of a sample of attempts: the median and 90th percentile of one attempt, and a prediction interval for
the sum over N new attempts.

The percentile interpolates linearly between order statistics (numpy's default, Hyndman and Fan's type 7). The sum
over N new attempts, from n pilot attempts with mean m and sample standard deviation s, has the expected value
N*m and, for independent attempts, the standard error sd_total = sqrt(N*s^2 + N^2*s^2/n): the first term is the
new attempts' own spread, the second the uncertainty of m itself. The 90% interval is N*m -/+ t*sd_total, t the
95% quantile of Student's t with n - 1 degrees of freedom (s is estimated from n attempts: a small pilot widens
the interval, as it should; with many attempts t tends to the normal 1.645), clipped at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel

LEVEL = 0.90
"""The prediction intervals' coverage."""
T_GRID_MAX = 100.0
T_GRID_POINTS = 200_001
"""The grid Student's t density is integrated on (step 0.0005: quantiles to about 1e-6)."""


class Spread(BaseModel):
    """One attempt's figure over the sample."""

    median: float
    p90: float
    mean: float
    attempts: int
    """How many attempts had this figure."""


class Range(BaseModel):
    """A total over new attempts: the expected value and its 90% prediction interval; None where unknown."""

    low: float | None = None
    expected: float | None = None
    high: float | None = None

    def scaled(self, factor: float) -> Range:
        return Range(**{key: None if value is None else value * factor for key, value in self.model_dump().items()})


def spread(values: Sequence[float]) -> Spread | None:
    """Median, 90th percentile and mean; None for no values."""
    if not values:
        return None
    median, p90 = np.quantile(values, [0.5, 0.9])
    return Spread(median=float(median), p90=float(p90), mean=sum(values) / len(values), attempts=len(values))


@lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile (p > 0.5) of Student's t with `df` degrees of freedom, by integrating its density."""
    x = np.linspace(0.0, T_GRID_MAX, T_GRID_POINTS)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
    cdf = 0.5 + np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(x))])
    return float(np.interp(p, cdf, x))


def sum_range(values: Sequence[float], count: int) -> Range:
    """The sum over `count` new attempts, predicted from `values` (one per pilot attempt): all None without
    values; only the expected value from a single one (no spread to go by)."""
    if count == 0:
        return Range(low=0.0, expected=0.0, high=0.0)
    n = len(values)
    if n == 0:
        return Range()
    mean = sum(values) / n
    expected = count * mean
    if n == 1:
        return Range(expected=expected)
    variance = sum((value - mean) ** 2 for value in values) / (n - 1)
    half = t_quantile((1 + LEVEL) / 2, n - 1) * math.sqrt(variance * (count + count * count / n))
    return Range(low=max(0.0, expected - half), expected=expected, high=expected + half)
