"""summary.md: the summary.json of a run as a page a person reads first.

Figures the page has no line of its own for (a statistic added to the model) are listed under "More figures"
with their description; `LEFT_TO_JSON` are the fields summary.md leaves to summary.json and tasks.csv.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hcu.osworld.summary.model import RunSummary, unplaced_figures
from hcu.osworld.summary.parts import Baseline, Comparison, Interval
from hcu.osworld.summary.repeats import TaskScores

LISTED = 30
"""Long lists (withheld, discordant tasks) show this many and a count; summary.json and tasks.csv have all."""

PLACED = frozenset({
    "run_id", "benchmark_version", "agent", "model", "effort", "scripted_model", "tasks", "valid", "withheld",
    "coverage", "score", "lower_bound", "upper_bound", "valid_mean", "raw_score_sum", "binary_successes",
    "binary_rate_lower_bound", "ci95", "binary_ci95", "zeroed_by_budget_or_timeout", "zeroed_though_evaluator_passed",
    "withheld_tasks", "read_nothing_tasks", "attempts", "retried_tasks", "attempts_by_class", "machine_sec",
    "machine_sec_per_valid_result", "model_calls", "tokens", "retried", "by_domain", "by_stratum", "repeats",
    "repeat_policy", "pass_at_k", "pass_hat_k", "run_to_run_sd", "task_list_sd", "cluster_bootstrap_ci95",
    "cost_usd", "cost_per_valid_result_usd", "wasted", "rate_limit_waits", "compare", "baseline",
    "regraded"})
"""Fields summary.md has a line or a section of its own for."""
LEFT_TO_JSON = frozenset({"schema_version", "binary_rate", "statuses", "terminations", "failure_classes",
                          "attempts_without_duration", "retry_policy", "per_task"})
"""Fields summary.md leaves to summary.json and tasks.csv."""

SCRIPTED_BANNER = ("> **SCRIPTED MODEL. This run did not measure a model.** A scripted upstream stood in "
                   "for the model behind the gateway (`scripted_model: true` in the config). The score "
                   "checks the harness end to end and says nothing about any model's ability.")


def pct(value: float | None) -> str:
    return "withheld" if value is None else f"{100 * value:.1f}%"


def interval(ci: Interval | None) -> str:
    if ci is None:
        return "n/a"
    return f"{pct(ci.low)} to {pct(ci.high)} ({ci.method})"


def points(sd: float | None) -> str:
    return "n/a" if sd is None else f"{100 * sd:.1f} points"


def usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def repeats_phrase(repeats: Sequence[int]) -> str:
    """"mean of 3 repeats", or the range when tasks ask for different numbers."""
    low, high = min(repeats), max(repeats)
    if low == high:
        return f"mean of {low} repeat{'' if low == 1 else 's'}"
    return f"mean of each task's repeats ({low} to {high})"


def _duration(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds:.0f} s"


def _repeat_lines(s: RunSummary, repeated: bool) -> list[str]:
    """The variance terms always; pass@k, pass^k and the cluster bootstrap once tasks have repeats."""
    k, run_to_run, task_list = s.repeats, s.run_to_run_sd, s.task_list_sd
    if task_list is None:
        why = (" (needs two tasks with every repeat scored)", " (needs two tasks with every repeat scored)")
    elif run_to_run is None:
        why = (" (needs a task with two scored repeats)", " (no repeats to tell apart: holds run-to-run noise too)")
    else:
        why = ("", "")
    lines = [f"| Run-to-run sd of the score (shrinks with repeats) | {points(run_to_run)}{why[0]} |",
             f"| Task-list sd of the score (which tasks are in the list) | {points(task_list)}{why[1]} |"]
    if repeated:
        lines += [f"| 95% interval, tasks resampled with their repeats | {interval(s.cluster_bootstrap_ci95)} |",
                  f"| pass@{k} (at least one of {k} succeeds) | {pct(s.pass_at_k)} |",
                  f"| pass^{k} (all {k} succeed) | {pct(s.pass_hat_k)} |"]
    return lines


def _cost_line(s: RunSummary, note: str) -> str:
    run, retried = s.cost_usd, s.retried.cost_usd if s.retried else None
    if run is None:
        return f"| Cost | {note} |"
    return (f"| Cost ({note}) | {usd(run)}: scored attempts {usd(run - (retried or 0.0))}, retried {usd(retried)}; "
            f"per valid result {usd(s.cost_per_valid_result_usd)} |")


def _share(value: float | None) -> str:
    return "" if value is None else f" ({pct(value)} of the run's)"


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h ({seconds:,.0f} s)"


def _wasted_lines(s: RunSummary) -> list[str]:
    """Beside the cost: what attempts that gave no valid result spent, and the rate-limit waits (absent from a
    summary.json of before them)."""
    lines = []
    if (w := s.wasted) is not None:
        cost = (w.cost_unknown or "unknown") if w.cost_usd is None else usd(w.cost_usd)
        lines.append(f"| Spent on attempts that gave no valid result ({w.attempts}: {w.set_aside} set aside and "
                     f"retried, {w.withheld} withheld) | cost {cost}{_share(w.share_of_cost)}; {w.total:,} tokens"
                     f"{_share(w.share_of_tokens)} (fully accounted {w.accounted_attempts} of {w.attempts}); "
                     f"{w.model_calls} model calls{_share(w.share_of_model_calls)}; machine time "
                     f"{_duration(w.machine_sec)} |")
    if (waits := s.rate_limit_waits) is not None:
        if waits.wait_sec is None or waits.without_valid_result_sec is None:
            lines.append(f"| Rate-limit waits (token log) | unknown: {waits.unknown} |")
        else:
            lines.append(f"| Rate-limit waits (token log; attempts waiting at once each count) | "
                         f"{hours(waits.wait_sec)} over {waits.requests_waited:,} of {waits.requests:,} requests; "
                         f"{hours(waits.without_valid_result_sec)} of it in attempts that gave no valid result |")
    return lines


def _regraded_lines(s: RunSummary) -> list[str]:
    """The scores above count regrades of kept final desktops where they ran: say so, with what changed."""
    if (r := s.regraded) is None:
        return []
    changes = "; ".join(f"{a.task_id} {_or_withheld(a.first_score)} -> {_or_withheld(a.score)}"
                        for a in r.attempts if a.first_score != a.score)
    failed = f"; {r.not_regraded} could not be regraded (first grading stands)" if r.not_regraded else ""
    return [f"| Regraded (kept final desktops scored again; these scores count, the first grading stays in each "
            f"result.json) | {len(r.attempts)} repeats, {r.changed} changed{': ' + changes if changes else ''}"
            f"{failed} |"]


def _or_withheld(score: float | None) -> str:
    return "withheld" if score is None else f"{score:g}"


def _binary_line(s: RunSummary, repeats: Sequence[int]) -> str:
    """The success rate the interval is of (a mean of per-task rates, as the score is a mean of task means),
    with the count of successful repeats beside it, never as a fraction that would be another mean."""
    return (f"| Binary success (score 1.0): mean of per-task success rates, missing repeats count 0 | "
            f"{pct(s.binary_rate_lower_bound)} ({interval(s.binary_ci95)}); {s.binary_successes} of {sum(repeats)} "
            "repeats succeeded |")


def _headline(s: RunSummary, repeats: Sequence[int], cost_note: str) -> list[str]:
    n, phrase = s.tasks, repeats_phrase(repeats)
    score = (f"**{pct(s.score)}**" if s.score is not None else
             f"**withheld**: {s.withheld} of {n} tasks lack a usable score for some repeat")
    tokens, retried = s.tokens, s.retried
    per_result = tokens.per_valid_result
    lines = [
        "| | |", "|---|---|",
        f"| Score ({phrase}; denominator: all {n} config tasks) | {score} |",
        f"| 95% interval ({s.ci95.of.replace('_', ' ')}) | {interval(s.ci95)} |",
        *_baseline_lines(s.baseline),
        *_repeat_lines(s, max(repeats) > 1),
        f"| Lower bound (withheld count as 0) | {pct(s.lower_bound)} |",
        f"| Upper bound (withheld count as 1) | {pct(s.upper_bound)} |",
        f"| Coverage (validly graded attempts) | {s.valid}/{sum(repeats)} = {pct(s.coverage)} |",
        _cost_line(s, cost_note),
        *_wasted_lines(s),
        *_regraded_lines(s),
        _binary_line(s, repeats),
        f"| Raw evaluator score sum | {s.raw_score_sum:.3f} |",
        f"| Mean over validly graded tasks | {pct(s.valid_mean) if s.valid else 'n/a'} |",
        f"| Ended on budget or timeout (scored 0) | {s.zeroed_by_budget_or_timeout}"
        f" ({s.zeroed_though_evaluator_passed} of them passed by the evaluator) |",
        f"| Attempts | {s.attempts} ({s.retried_tasks} tasks retried; retries are never scored) |",
        f"| Machine time | {_duration(s.machine_sec)}; per valid result {_duration(s.machine_sec_per_valid_result)} |",
        f"| Model calls | {s.model_calls} |",
        f"| Tokens (attempts fully accounted: {tokens.accounted_tasks}/{sum(repeats)}) | {tokens.total:,} "
        f"(input {tokens.input_tokens:,}, output {tokens.output_tokens:,}); per valid result "
        f"{'n/a' if per_result is None else f'{per_result:,.0f}'} |",
    ]
    if retried is not None:
        lines.append(f"| Retried attempts (not scored, spent) | {retried.attempts}: {_duration(retried.machine_sec)}, "
                     f"{retried.model_calls} model calls, {retried.total:,} tokens (input {retried.input_tokens:,}, "
                     f"output {retried.output_tokens:,}; fully accounted {retried.accounted_attempts}) |")
    return lines


def _baseline_lines(b: Baseline | None) -> list[str]:
    """The score without the tasks the evaluator passes untouched, beside the score (same interval method)."""
    if b is None:
        return []
    unknown = f"; {len(b.unknown)} tasks of unknown untouched score stay in" if b.unknown else ""
    without = b.without_untouched_passes
    if without is None:
        return [f"| Score without the {len(b.passes_untouched)} tasks passing untouched (do-nothing baseline) | "
                "no task left |"]
    score = f"**{pct(without.score)}**" if without.score is not None else (
        f"**withheld** (lower bound {pct(without.lower_bound)})")
    return [f"| Score without the {len(b.passes_untouched)} tasks passing untouched (do-nothing baseline{unknown}) "
            f"| {score}; 95% {interval(without.ci95)} |"]


def _baseline_section(b: Baseline) -> list[str]:
    stand_ins = (" **Made with stand-in assets**: an untouched state may differ from the real task's."
                 if b.stand_ins else "")
    lines = ["", "## Do-nothing baseline", "",
             f"The untouched state of each task (setup done, no agent) as the official evaluator scored it in the "
             f"canary sweep `{b.sweep_dir}` ({b.sweep_run_id}, on {b.guest}).{stand_ins} "
             f"{len(b.passes_untouched)} tasks pass untouched (they say nothing about the agent), "
             f"{b.fails_untouched} fail untouched, {len(b.unknown)} unknown (never assumed 0).", ""]
    if b.passes_untouched:
        lines += ["### Passing untouched", ""]
        lines += _listed([f"{t.task_id} ({t.domain}): untouched score {t.score:.3g}" for t in b.passes_untouched])
    if b.unknown:
        lines += ["", "### Untouched score unknown", ""]
        lines += _listed([f"{t.task_id} ({t.domain}): {t.why}" for t in b.unknown])
    return lines


def _group_table(title: str, groups: dict[str, Any], repeats: Sequence[int]) -> list[str]:
    if not groups:
        return []
    said = [f"Each task's score is the {repeats_phrase(repeats)}.", ""] if max(repeats) > 1 else []
    lines = ["", f"## By {title}", "", *said,
             f"| {title} | tasks | valid attempts | withheld tasks | score | lower bound | binary |",
             "|---|---|---|---|---|---|---|"]
    for name, g in groups.items():
        lines.append(f"| {name} | {g.tasks} | {g.valid} | {g.withheld} | {pct(g.score)} | "
                     f"{pct(g.lower_bound)} | {g.binary_successes} |")
    return lines


def _classes(classes: dict[str, Any]) -> list[str]:
    if not classes:
        return []
    lines = ["", "## Attempts by how they ended", "", "| class | attempts | retried | scored |", "|---|---|---|---|"]
    for name, c in classes.items():
        flags = ["n/a" if flag is None else ("yes" if flag else "no") for flag in (c.retried, c.scored)]
        lines.append(f"| {name} | {c.attempts} | {flags[0]} | {flags[1]} |")
    return lines


def _listed(items: list[str]) -> list[str]:
    more = [f"- ... and {len(items) - LISTED} more (see tasks.csv)"] if len(items) > LISTED else []
    return [f"- {item}" for item in items[:LISTED]] + more


def _sign(c: Comparison) -> str:
    if c.sign_settled:
        better = "better" if c.mean_difference > 0 else "worse"
        return f"The sign is settled: the interval excludes 0, so this run is {better}."
    return ("The sign is not settled: the interval includes 0. Buy repeats of the discordant tasks only: "
            f"`python -m hcu.osworld.summarize {c.this_run_dir} --compare {c.other_run_dir} "
            "--rerun-discordant K` writes both runs' configs with K more repeats on them.")


def _comparison(c: Comparison) -> list[str]:
    lines = ["", f"## Paired comparison with {c.other_run_id}", "",
             f"{c.paired_tasks} tasks scored in full in both runs (of {c.common_tasks} in both configs; "
             f"{len(c.not_comparable)} not comparable). Difference of task means (this minus other): "
             f"**{100 * c.mean_difference:+.1f} points**, 95% interval "
             + ("n/a" if c.ci95 is None else f"{100 * c.ci95.low:+.1f} to {100 * c.ci95.high:+.1f} points")
             + ". " + _sign(c),
             f"Only the {len(c.discordant)} discordant tasks decide this ({c.this_better} better here, "
             f"{c.other_better} better there; task means, repeats in brackets):", ""]
    lines += _listed([f"{d.task_id}: {d.score:.3g} ({d.repeats}) vs {d.other_score:.3g} ({d.other_repeats})"
                      for d in c.discordant])
    if c.rerun_configs:
        lines += ["", "Re-run just the discordant tasks (same run ids; only the added repeats run), then compare "
                  "again:"] + [f"`python -m hcu.osworld.run_queue {path}`" for path in c.rerun_configs]
    return lines


def _repeat_scores(task: TaskScores) -> str:
    if all(score in (0.0, 1.0) for score in task.scores):
        return f"{task.successes} of {len(task.scores)} succeeded"
    return f"scores {', '.join(f'{score:.3g}' for score in task.scores)} (mean {task.mean:.3g})"


def _disagreeing_repeats(tasks: Sequence[TaskScores]) -> list[str]:
    """Tasks whose scored repeats did not all score the same (pass/fail or partial): where the run-to-run term
    comes from."""
    mixed = [task for task in tasks if len(set(task.scores)) > 1]
    if not mixed:
        return []
    lines = ["", f"## Tasks whose repeats disagree ({len(mixed)})", ""]
    return lines + _listed([f"{task.task_id}: {_repeat_scores(task)}" for task in mixed])


def figure(value: Any) -> str:
    """Any summary value, readably (a figure summary.md has no line of its own for)."""
    if isinstance(value, Interval):
        return interval(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return "n/a" if value is None else str(value)


def _more_figures(s: RunSummary) -> list[str]:
    more = unplaced_figures(s, LEFT_TO_JSON | PLACED)
    if not more:
        return []
    return ["", "## More figures", "", "| | |", "|---|---|"] + [
        f"| {label} (`{name}`) | {figure(value)} |" for name, label, value in more]


def render_markdown(s: RunSummary, tasks: Sequence[TaskScores], cost_note: str) -> str:
    """summary.md from the summary and the config's tasks with their repeats; `cost_note`: at which prices the
    cost is, or why it is unknown."""
    repeats = [task.repeats for task in tasks]
    phrase = repeats_phrase(repeats)
    lines = [f"# Summary: {s.run_id}", ""]
    if s.scripted_model:
        lines += [SCRIPTED_BANNER, ""]
    lines += [f"Agent {s.agent}, model {s.model} ({s.effort}), OSWorld {s.benchmark_version}. "
              f"Each task's score is the {phrase} (policy: {s.repeat_policy}, never a best-of); retries of "
              "an attempt infrastructure broke are never scored.", ""]
    lines += _headline(s, repeats, cost_note) + _more_figures(s) + _classes(s.attempts_by_class)
    lines += _group_table("domain", s.by_domain, repeats) + _group_table("stratum", s.by_stratum, repeats)
    lines += _disagreeing_repeats(tasks)
    if s.withheld_tasks:
        lines += ["", f"## Withheld ({len(s.withheld_tasks)})", ""]
        lines += _listed([f"{t.task_id}: {t.reason}" for t in s.withheld_tasks])
    if s.read_nothing_tasks:
        lines += ["", f"## Scored although a getter read nothing ({len(s.read_nothing_tasks)})", "",
                  "OSWorld's score stands; its getter read nothing of the guest's state (None, a failed fetch, "
                  "an error logged), so check these before trusting their zeros.", ""]
        lines += _listed([f"{t.task_id}: {t.getters} (score {pct(t.score)})" for t in s.read_nothing_tasks])
    if s.baseline is not None:
        lines += _baseline_section(s.baseline)
    if s.compare is not None:
        lines += _comparison(s.compare)
    lines += ["", "The Wilson and bootstrap intervals cover the luck of which tasks are in the panel; with one repeat "
              "per task they do not separate run-to-run variation (the cluster bootstrap over tasks with their "
              "repeats does, once tasks have repeats).", ""]
    return "\n".join(lines)
