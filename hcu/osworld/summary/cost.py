"""What a run cost in USD: per task, for retried attempts apart, for the attempts that gave no valid result, and
per validly graded result.

Each attempt's cost is what its result.json says (records/cost.py prices its token-log rows), or, for an attempt
set aside without a result, what the queue priced its rows at (retry.json). A sum that includes one unknown
attempt is unknown (None), never a partial figure passed off as the whole: summary.json says how many attempts
were unknown and why that can be.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.repeats import TaskScores
from hcu.osworld.summary.rows import AttemptRow, RetriedAttempt
from hcu.osworld.summary.waste import withheld_attempts


def total(costs: Iterable[float | None]) -> float | None:
    """The sum, or None when any part is unknown."""
    values = list(costs)
    if any(value is None for value in values):
        return None
    return round(sum(values), 6)  # type: ignore[arg-type]


def _ran(rows: Iterable[AttemptRow]) -> list[AttemptRow]:
    return [row for row in rows if row.ran]


@dataclass(frozen=True)
class CostFigures:
    """What the run cost, as summary.json carries it: `cost_usd` (the run: every attempt, retries included),
    `retried.cost_usd` (attempts set aside under retries/: never scored, paid for), `wasted.cost_usd` (those and
    the withheld attempts of tasks/: every attempt that gave no valid result), `cost_usd` in each `per_task` row
    (the task's scored repeats) and `cost_per_valid_result_usd`; `note` says at which prices, or why unknown, and
    `wasted_unknown` why the wasted cost is unknown ("" when it is known)."""

    run: float | None
    retried: float | None
    per_task: dict[str, float | None]
    per_valid_result: float | None
    note: str
    wasted: float | None = None
    wasted_unknown: str = ""


def _unknown_note(config: RunConfig, unknown: int) -> str:
    """Why a sum with `unknown` attempts of unknown cost in it is unknown ("" when none is)."""
    if not unknown:
        return ""
    if not config.prices:
        return "unknown: the config has no prices"
    return (f"unknown: {unknown} attempts have no cost (a model without a price in their token-log rows, a "
            "generation logged without its tokens, or a result written before costs were recorded)")


def cost_figures(config: RunConfig, tasks: Sequence[TaskScores], retried: Sequence[RetriedAttempt],
                 valid_attempts: int) -> CostFigures:
    scored = _ran(row for task in tasks for row in task.rows)
    withheld = withheld_attempts(row for task in tasks for row in task.rows)
    unknown = sum(1 for row in scored if row.cost_usd is None) + sum(1 for r in retried if r.cost_usd is None)
    scored_usd, retried_usd = total(row.cost_usd for row in scored), total(r.cost_usd for r in retried)
    run = None if scored_usd is None or retried_usd is None else round(scored_usd + retried_usd, 6)
    note = _unknown_note(config, unknown) or (f"at the config's prices for {', '.join(sorted(config.prices))}"
                                              if config.prices else "no attempt made a model call")
    per_task = {task.task_id: total(row.cost_usd for row in _ran(task.rows)) for task in tasks}
    per_result = run / valid_attempts if run is not None and valid_attempts else None
    withheld_usd = total(row.cost_usd for row in withheld)
    wasted = None if withheld_usd is None or retried_usd is None else round(withheld_usd + retried_usd, 6)
    wasted_unknown = _unknown_note(config, sum(1 for row in withheld if row.cost_usd is None)
                                   + sum(1 for r in retried if r.cost_usd is None))
    return CostFigures(run, retried_usd, per_task, per_result, note, wasted, wasted_unknown)
