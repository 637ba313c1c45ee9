"""Two runs task by task: each task's mean over its scored repeats in both, whether they disagree, and the
paired difference over the tasks graded in both (the discordant tasks decide it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hcu.osworld.summary.repeats import means_differ, task_mean
from hcu.osworld.summary.stats import PairedDifference, paired_difference
from hcu.osworld.view.data import AttemptRow, RunIndex

Verdict = Literal["disagree", "not comparable", "only here", "only there", "agree"]
VERDICT_ORDER: dict[Verdict, int] = {"disagree": 0, "not comparable": 1, "only here": 2, "only there": 3,
                                     "agree": 4}


def scores(rows: list[AttemptRow]) -> list[float]:
    return [row.score for row in rows if row.score is not None]


@dataclass
class TaskPair:
    task_id: str
    domain: str
    this: list[AttemptRow] = field(default_factory=list)
    other: list[AttemptRow] = field(default_factory=list)

    @property
    def this_mean(self) -> float | None:
        return task_mean(scores(self.this))

    @property
    def other_mean(self) -> float | None:
        return task_mean(scores(self.other))

    @property
    def difference(self) -> float | None:
        if self.this_mean is None or self.other_mean is None:
            return None
        return self.this_mean - self.other_mean

    @property
    def verdict(self) -> Verdict:
        if not self.other:
            return "only here"
        if not self.this:
            return "only there"
        if self.difference is None:
            return "not comparable"
        return "disagree" if means_differ(scores(self.this), scores(self.other)) else "agree"

    @property
    def key(self) -> str:
        """The folder of its first repeat (what the side-by-side page opens)."""
        return self.this[0].key if self.this else self.other[0].key


@dataclass
class Comparison:
    pairs: list[TaskPair]
    """Disagreeing tasks first (largest difference first), then the ones that cannot be compared, then
    agreeing ones."""
    paired: PairedDifference

    @property
    def discordant(self) -> int:
        return sum(1 for pair in self.pairs if pair.verdict == "disagree")

    def better(self, sign: int) -> int:
        return sum(1 for pair in self.pairs if pair.difference is not None and pair.difference * sign > 0)


def compare_runs(this: RunIndex, other: RunIndex) -> Comparison:
    pairs: dict[str, TaskPair] = {}
    for side, index in (("this", this), ("other", other)):
        for row in index.rows:
            pair = pairs.setdefault(row.task_id, TaskPair(row.task_id, row.domain))
            pair.domain = pair.domain or row.domain
            getattr(pair, side).append(row)
    ordered = sorted(pairs.values(), key=lambda p: (VERDICT_ORDER[p.verdict], -abs(p.difference or 0.0)))
    both = [pair for pair in ordered if pair.difference is not None]
    paired = paired_difference([p.this_mean for p in both], [p.other_mean for p in both])  # type: ignore[misc]
    return Comparison(ordered, paired)
