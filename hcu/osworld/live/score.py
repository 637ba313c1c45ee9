"""The score so far with its 95% interval, drawn the summary's way (hcu/osworld/summary/stats.py): Wilson when
every score is 0 or 1, else the seeded bootstrap; with repeats, the cluster bootstrap over tasks. The interval is
drawn again only when the scores changed (a view redraws several times a second)."""

from __future__ import annotations

from functools import lru_cache

from hcu.osworld.queue.snapshot import ScoreFigures
from hcu.osworld.summary.parts import Interval
from hcu.osworld.summary.stats import cluster_bootstrap, mean_interval


@lru_cache(maxsize=4)
def _interval(units: tuple[tuple[float, int], ...], clustered: bool) -> Interval:
    values = [value for value, count in units for _ in range(count)]
    return cluster_bootstrap(values) if clustered else mean_interval(values)


def score_interval(score: ScoreFigures) -> Interval | None:
    """The 95% interval of the score so far (None before the first score)."""
    if score.mean is None:
        return None
    return _interval(tuple((float(value), int(count)) for value, count in score.units), score.clustered)


def score_text(score: ScoreFigures) -> str:
    """`0.750 (95% 0.301 to 0.954, wilson); 4 of 12 repeats scored (33.3% coverage), 1 withheld`."""
    counted = (f"{score.scored} of {score.planned} repeats scored ({100 * score.coverage:.1f}% coverage), "
               f"{score.withheld} withheld")
    interval = score_interval(score)
    if score.mean is None or interval is None:
        return f"none yet; {counted}"
    return f"{score.mean:.3f} (95% {interval.low:.3f} to {interval.high:.3f}, {interval.method}); {counted}"
