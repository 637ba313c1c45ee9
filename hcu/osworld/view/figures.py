"""The run's headline figures: from summary/summary.json when there is one (the numbers summarize reports, read
through the summary's model), else a live tally of the result files, said to be one. Fields the viewer has no
place for (a statistic added to the model, or a key of a newer summarize) are still shown."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hcu.osworld.summary.model import RunSummary, unplaced_figures
from hcu.osworld.summary.parts import Baseline, Interval, RateLimitWaits, WastedSpend
from hcu.osworld.view.data import AttemptRow
from hcu.osworld.view.html import MISSING, card, count, esc, kv, pct, seconds, usd

REPEAT_FIGURES = (("pass@k", "pass_at_k"), ("pass^k", "pass_hat_k"), ("run-to-run sd", "run_to_run_sd"),
                  ("task-list sd", "task_list_sd"), ("bootstrap interval", "cluster_bootstrap_ci95"))
"""(label, RunSummary field) of the repeats box."""
PLACED = frozenset({
    "schema_version", "run_id", "benchmark_version", "agent", "model", "effort", "scripted_model", "tasks", "valid",
    "withheld", "coverage", "score", "lower_bound", "upper_bound", "valid_mean", "raw_score_sum",
    "binary_successes", "binary_rate", "binary_rate_lower_bound", "ci95", "binary_ci95", "statuses", "terminations",
    "failure_classes", "zeroed_by_budget_or_timeout", "zeroed_though_evaluator_passed", "withheld_tasks",
    "read_nothing_tasks", "attempts", "retried_tasks", "attempts_by_class", "machine_sec",
    "machine_sec_per_valid_result", "attempts_without_duration", "model_calls", "tokens", "retried", "by_domain",
    "by_stratum", "retry_policy", "repeats", "repeat_policy", "per_task", "cost_usd", "cost_per_valid_result_usd",
    "wasted", "rate_limit_waits", "compare", "baseline", *(name for _, name in REPEAT_FIGURES)})
"""RunSummary fields the run page shows in places of their own, or leaves to the files."""


def interval(ci: Interval | None) -> str:
    if ci is None:
        return MISSING
    return f"{pct(ci.low)} to {pct(ci.high)} ({esc(ci.method)})"


def figure(value: Any) -> str:
    """Any summary value, readably: a fraction as a percentage is left to the caller; intervals as intervals."""
    if isinstance(value, Interval):
        return interval(value)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (int, str)) or value is None:
        return esc(MISSING if value is None else value)
    return f"<code>{esc(value)}</code>"


def summary_cards(s: RunSummary) -> str:
    n, tokens = s.tasks, s.tokens
    costed = "cost_usd" in s.model_fields_set
    cards = [
        card("Score", f"<b>{pct(s.score)}</b>" if s.score is not None else "<b>withheld</b>",
             f"95%: {interval(s.ci95)}"),
        card("Coverage", pct(s.coverage), f"{count(s.valid)}/{count(n)} validly graded"),
        card("Bounds", f"{pct(s.lower_bound)} – {pct(s.upper_bound)}",
             f"withheld counted 0 / 1 ({count(s.withheld)} withheld)"),
        card("Binary success", pct(s.binary_rate_lower_bound),
             f"mean of per-task success rates; {count(s.binary_successes)} repeats scored 1.0; 95% "
             f"{interval(s.binary_ci95)}"),
        card("Attempts", count(s.attempts), f"{count(s.retried_tasks)} tasks retried"),
        card("Machine time", seconds(s.machine_sec), f"{seconds(s.machine_sec_per_valid_result)} per valid result"),
        card("Model calls", count(s.model_calls), f"zeroed by budget/timeout: {count(s.zeroed_by_budget_or_timeout)}"),
        card("Tokens", count(tokens.total),
             f"in {count(tokens.input_tokens)} · out {count(tokens.output_tokens)} · "
             f"accounted {count(tokens.accounted_tasks)}/{count(n)}"),
        card("Cost", usd(s.cost_usd) if costed else "not in summary",
             f"{usd(s.cost_per_valid_result_usd)} per valid result" if costed else ""),
        wasted_card(s.wasted), waits_card(s.rate_limit_waits),
    ]
    if s.baseline is not None:
        cards.insert(1, baseline_card(s.baseline))
    if s.repeats is not None:
        cards.append(card("Repeats", f"k = {s.repeats}",
                          f"{esc(s.repeat_policy or 'mean')}; pass@k {figure(s.pass_at_k)}"))
    return f'<div class="cards">{"".join(cards)}</div>'


def _of_run(share: float | None) -> str:
    return "" if share is None else f" ({pct(share)})"


def hours(value: float) -> str:
    return f"{value / 3600:.2f} h"


def wasted_card(w: WastedSpend | None) -> str:
    """What attempts that gave no valid result spent, beside the cost (summary.json `wasted`)."""
    label = "Spent without a valid result"
    if w is None:
        return card(label, "not in summary", "a summarize from before this figure")
    why = "" if w.cost_usd is not None else f"cost {esc(w.cost_unknown or 'unknown')} · "
    return card(label, usd(w.cost_usd) + _of_run(w.share_of_cost),
                f"{why}{count(w.attempts)} attempts ({count(w.set_aside)} set aside and retried, {count(w.withheld)} "
                f"withheld) · {count(w.total)} tokens{_of_run(w.share_of_tokens)} (accounted "
                f"{count(w.accounted_attempts)}/{count(w.attempts)}) · {count(w.model_calls)} model calls"
                f"{_of_run(w.share_of_model_calls)}")


def waits_card(waits: RateLimitWaits | None) -> str:
    """The hours requests waited on rate limits, and the part in attempts without a valid result."""
    label = "Rate-limit waits"
    if waits is None:
        return card(label, "not in summary", "a summarize from before this figure")
    if waits.wait_sec is None or waits.without_valid_result_sec is None:
        return card(label, "unknown", esc(waits.unknown))
    return card(label, hours(waits.wait_sec),
                f"{hours(waits.without_valid_result_sec)} in attempts without a valid result · "
                f"{count(waits.requests_waited)} of {count(waits.requests)} requests waited (token log)")


def baseline_card(b: Baseline) -> str:
    """The score without the tasks the evaluator passes untouched, beside the score."""
    without = b.without_untouched_passes
    label = f"Without {len(b.passes_untouched)} passing untouched"
    if without is None:
        return card(label, "no task left", "every task passes untouched")
    value = f"<b>{pct(without.score)}</b>" if without.score is not None else "<b>withheld</b>"
    unknown = f"; {len(b.unknown)} of unknown untouched score stay in" if b.unknown else ""
    stand_ins = "; sweep on STAND-IN ASSETS" if b.stand_ins else ""
    return card(label, value, f"95%: {interval(without.ci95)}; do-nothing baseline{unknown}{stand_ins}")


def tally_cards(rows: list[AttemptRow]) -> str:
    """Figures from the rows alone (no summary.json): counts and sums, no intervals."""
    n = len(rows)
    scores = [row.score for row in rows if row.score is not None]
    withheld = n - len(scores)
    costs = [row.cost_usd for row in rows if row.cost_usd is not None]
    unknown_cost = sum(1 for row in rows if row.status not in ("not started",) and row.cost_usd is None)
    cards = [
        card("Score", pct(sum(scores) / n) if n and not withheld else "<b>withheld</b>",
             f"lower bound {pct(sum(scores) / n) if n else MISSING}"),
        card("Coverage", pct(len(scores) / n) if n else MISSING, f"{len(scores)}/{n} attempts validly graded"),
        card("Model calls", count(sum(row.model_calls or 0 for row in rows)), ""),
        card("Tokens", count(sum(row.tokens or 0 for row in rows)),
             f"accounted {sum(1 for row in rows if row.tokens is not None)}/{n}"),
        card("Machine time", seconds(sum(row.duration_sec or 0.0 for row in rows)), "attempts in tasks/"),
        card("Cost", usd(sum(costs)) if costs else "unknown", f"{unknown_cost} attempts of unknown cost"),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def repeat_figures(s: RunSummary) -> list[tuple[str, str]]:
    return [(label, figure(getattr(s, name))) for label, name in REPEAT_FIGURES if getattr(s, name) is not None]


def other_fields(s: RunSummary, unknown: dict[str, Any]) -> str:
    """Summary fields the page has no place for, by their description, and keys of a newer summarize as they
    are."""
    extra = [(label, figure(value)) for _, label, value in unplaced_figures(s, PLACED)]
    extra += [(key, figure(value)) for key, value in unknown.items()]
    return kv(extra) if extra else ""
