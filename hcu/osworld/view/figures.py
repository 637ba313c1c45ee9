"""The run's headline figures: from summary/summary.json when there is one (the numbers summarize reports),
else a live tally of the result files, said to be one. Fields the viewer does not name are still shown."""

from __future__ import annotations

from typing import Any

from hcu.osworld.view.data import AttemptRow
from hcu.osworld.view.html import MISSING, card, count, esc, kv, pct, seconds, usd

REPEAT_FIGURES = (
    ("pass@k", ("pass_at_k", "pass@k")),
    ("pass^k", ("pass_hat_k", "pass^k")),
    ("run-to-run sd", ("run_to_run_sd", "sd_run_to_run", "run_to_run_std")),
    ("task-list sd", ("task_list_sd", "sd_task_list", "task_list_std")),
    ("bootstrap interval", ("bootstrap_ci95", "cluster_bootstrap_ci95", "bootstrap")),
)
SHOWN_KEYS = frozenset({
    "run_id", "benchmark_version", "agent", "model", "effort", "scripted_model", "tasks", "valid", "withheld",
    "coverage", "score", "lower_bound", "upper_bound", "valid_mean", "raw_score_sum", "binary_successes",
    "binary_rate", "binary_rate_lower_bound", "ci95", "binary_ci95", "statuses", "terminations", "failure_classes",
    "zeroed_by_budget_or_timeout", "zeroed_though_evaluator_passed", "withheld_tasks", "read_nothing_tasks",
    "attempts", "retried_tasks", "attempts_by_class", "machine_sec", "machine_sec_per_valid_result",
    "attempts_without_duration", "model_calls", "tokens", "retried", "by_domain", "by_stratum", "retry_policy",
    "repeats", "repeat_policy", "per_task", "cost_usd", "cost_per_valid_result_usd", "compare",
    *(name for _, names in REPEAT_FIGURES for name in names)})


def interval(ci: Any) -> str:
    if not isinstance(ci, dict) or "low" not in ci or "high" not in ci:
        return MISSING
    method = f" ({esc(ci['method'])})" if ci.get("method") else ""
    return f"{pct(ci['low'])} to {pct(ci['high'])}{method}"


def figure(value: Any) -> str:
    """Any summary value, readably: a fraction as a percentage is left to the caller; intervals as intervals."""
    if isinstance(value, dict) and "low" in value and "high" in value:
        return interval(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (int, str)) or value is None:
        return esc(MISSING if value is None else value)
    return f"<code>{esc(value)}</code>"


def first(summary: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((summary[name] for name in names if name in summary), None)


def summary_cards(s: dict[str, Any]) -> str:
    n, tokens = s.get("tasks", 0), s.get("tokens") or {}
    score = s.get("score")
    withheld = s.get("withheld", 0)
    cost = s.get("cost_usd")
    cards = [
        card("Score", f"<b>{pct(score)}</b>" if score is not None else "<b>withheld</b>",
             f"95%: {interval(s.get('ci95'))}"),
        card("Coverage", pct(s.get("coverage")), f"{count(s.get('valid'))}/{count(n)} validly graded"),
        card("Bounds", f"{pct(s.get('lower_bound'))} – {pct(s.get('upper_bound'))}",
             f"withheld counted 0 / 1 ({count(withheld)} withheld)"),
        card("Binary success", count(s.get("binary_successes")),
             f"{pct(s.get('binary_rate_lower_bound'))} of {n}; 95% {interval(s.get('binary_ci95'))}"),
        card("Attempts", count(s.get("attempts")), f"{count(s.get('retried_tasks'))} tasks retried"),
        card("Machine time", seconds(s.get("machine_sec")),
             f"{seconds(s.get('machine_sec_per_valid_result'))} per valid result"),
        card("Model calls", count(s.get("model_calls")),
             f"zeroed by budget/timeout: {count(s.get('zeroed_by_budget_or_timeout'))}"),
        card("Tokens", count(tokens.get("total")),
             f"in {count(tokens.get('input_tokens'))} · out {count(tokens.get('output_tokens'))} · "
             f"accounted {count(tokens.get('accounted_tasks'))}/{count(n)}"),
        card("Cost", usd(cost) if "cost_usd" in s else "not in summary",
             f"{usd(s.get('cost_per_valid_result_usd'))} per valid result" if "cost_usd" in s else ""),
    ]
    if isinstance(s.get("repeats"), int):
        pass_k = first(s, REPEAT_FIGURES[0][1])
        cards.append(card("Repeats", f"k = {s['repeats']}",
                          f"{esc(s.get('repeat_policy') or 'mean')}; pass@k {figure(pass_k)}"))
    return f'<div class="cards">{"".join(cards)}</div>'


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


def repeat_figures(s: dict[str, Any]) -> list[tuple[str, str]]:
    return [(label, figure(first(s, names))) for label, names in REPEAT_FIGURES if first(s, names) is not None]


def other_fields(s: dict[str, Any]) -> str:
    """summary.json fields this viewer has no place for (a newer summarize), as they are."""
    extra = [(key, figure(value)) for key, value in s.items() if key not in SHOWN_KEYS]
    return kv(extra) if extra else ""
