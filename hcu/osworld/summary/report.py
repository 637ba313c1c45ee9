"""summary.md: the summary.json of a run as a page a person reads first."""

from __future__ import annotations

from typing import Any

LISTED = 30
"""Long lists (withheld, discordant tasks) show this many and a count; summary.json and tasks.csv have all."""

SCRIPTED_BANNER = ("> **SCRIPTED MODEL. This run did not measure a model.** A scripted upstream stood in "
                   "for the model behind the gateway (`scripted_model: true` in the config). The score "
                   "checks the harness end to end and says nothing about any model's ability.")


def pct(value: float | None) -> str:
    return "withheld" if value is None else f"{100 * value:.1f}%"


def interval(ci: dict[str, Any] | None) -> str:
    if ci is None:
        return "n/a"
    return f"{pct(ci['low'])} to {pct(ci['high'])} ({ci['method']})"


def _duration(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds:.0f} s"


def _headline(s: dict[str, Any]) -> list[str]:
    n = s["tasks"]
    score = (f"**{pct(s['score'])}**" if s["score"] is not None else
             f"**withheld**: {s['withheld']} of {n} tasks have no usable score")
    tokens, retried = s["tokens"], s["retried"]
    per_result = tokens["per_valid_result"]
    return [
        "| | |", "|---|---|",
        f"| Score (denominator: all {n} config tasks) | {score} |",
        f"| 95% interval ({s['ci95']['of'].replace('_', ' ')}) | {interval(s['ci95'])} |",
        f"| Lower bound (withheld count as 0) | {pct(s['lower_bound'])} |",
        f"| Upper bound (withheld count as 1) | {pct(s['upper_bound'])} |",
        f"| Coverage (validly graded) | {s['valid']}/{n} = {pct(s['coverage'])} |",
        f"| Binary success (score 1.0) | {s['binary_successes']}/{n} = {pct(s['binary_rate_lower_bound'])}"
        f" ({interval(s['binary_ci95'])}) |",
        f"| Raw evaluator score sum | {s['raw_score_sum']:.3f} |",
        f"| Mean over validly graded tasks | {pct(s['valid_mean']) if s['valid'] else 'n/a'} |",
        f"| Ended on budget or timeout (scored 0) | {s['zeroed_by_budget_or_timeout']}"
        f" ({s['zeroed_though_evaluator_passed']} of them passed by the evaluator) |",
        f"| Attempts | {s['attempts']} ({s['retried_tasks']} tasks retried; retries are never scored) |",
        f"| Machine time | {_duration(s['machine_sec'])}; per valid result "
        f"{_duration(s['machine_sec_per_valid_result'])} |",
        f"| Model calls | {s['model_calls']} |",
        f"| Tokens (tasks fully accounted: {tokens['accounted_tasks']}/{n}) | {tokens['total']:,} "
        f"(input {tokens['input_tokens']:,}, output {tokens['output_tokens']:,}); per valid result "
        f"{'n/a' if per_result is None else f'{per_result:,.0f}'} |",
        f"| Retried attempts (not scored, spent) | {retried['attempts']}: {_duration(retried['machine_sec'])}, "
        f"{retried['model_calls']} model calls, {retried['total']:,} tokens (input {retried['input_tokens']:,}, "
        f"output {retried['output_tokens']:,}; fully accounted {retried['accounted_attempts']}) |",
    ]


def _group_table(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    if not groups:
        return []
    lines = ["", f"## By {title}", "",
             f"| {title} | tasks | valid | withheld | score | lower bound | binary |",
             "|---|---|---|---|---|---|---|"]
    for name, g in groups.items():
        lines.append(f"| {name} | {g['tasks']} | {g['valid']} | {g['withheld']} | {pct(g['score'])} | "
                     f"{pct(g['lower_bound'])} | {g['binary_successes']} |")
    return lines


def _classes(classes: dict[str, dict[str, Any]]) -> list[str]:
    if not classes:
        return []
    lines = ["", "## Attempts by how they ended", "", "| class | attempts | retried | scored |", "|---|---|---|---|"]
    for name, c in classes.items():
        flags = ["n/a" if c[key] is None else ("yes" if c[key] else "no") for key in ("retried", "scored")]
        lines.append(f"| {name} | {c['attempts']} | {flags[0]} | {flags[1]} |")
    return lines


def _listed(items: list[str]) -> list[str]:
    more = [f"- ... and {len(items) - LISTED} more (see tasks.csv)"] if len(items) > LISTED else []
    return [f"- {item}" for item in items[:LISTED]] + more


def _comparison(c: dict[str, Any]) -> list[str]:
    lines = ["", f"## Paired comparison with {c['other_run_id']}", "",
             f"{c['paired_tasks']} tasks graded in both runs (of {c['common_tasks']} in both configs; "
             f"{len(c['not_comparable'])} not comparable). Difference (this minus other): "
             f"**{100 * c['mean_difference']:+.1f} points**, 95% interval "
             + ("n/a" if c["ci95"] is None else
                f"{100 * c['ci95']['low']:+.1f} to {100 * c['ci95']['high']:+.1f} points") + ".",
             f"Only the {len(c['discordant'])} discordant tasks decide this ({c['this_better']} better here, "
             f"{c['other_better']} better there):", ""]
    lines += _listed([f"{d['task_id']}: {d['score']:g} vs {d['other_score']:g}" for d in c["discordant"]])
    if c["rerun_configs"]:
        lines += ["", "Re-run just the discordant set:"] + [f"`python -m hcu.osworld.run_queue {path}`"
                                                             for path in c["rerun_configs"]]
    return lines


def render_markdown(s: dict[str, Any]) -> str:
    lines = [f"# Summary: {s['run_id']}", ""]
    if s["scripted_model"]:
        lines += [SCRIPTED_BANNER, ""]
    lines += [f"Agent {s['agent']}, model {s['model']} ({s['effort']}), OSWorld {s['benchmark_version']}. "
              "One scored attempt per task.", ""]
    lines += _headline(s) + _classes(s["attempts_by_class"])
    lines += _group_table("domain", s["by_domain"]) + _group_table("stratum", s["by_stratum"])
    if s["withheld_tasks"]:
        lines += ["", f"## Withheld ({len(s['withheld_tasks'])})", ""]
        lines += _listed([f"{t['task_id']}: {t['reason']}" for t in s["withheld_tasks"]])
    if s.get("read_nothing_tasks"):
        lines += ["", f"## Scored although a getter read nothing ({len(s['read_nothing_tasks'])})", "",
                  "OSWorld's score stands; its getter read nothing of the guest's state (None, a failed fetch, "
                  "an error logged), so check these before trusting their zeros.", ""]
        lines += _listed([f"{t['task_id']}: {t['getters']} (score {pct(t['score'])})"
                          for t in s["read_nothing_tasks"]])
    if "compare" in s:
        lines += _comparison(s["compare"])
    lines += ["", "Intervals cover the luck of which tasks are in the panel, not run-to-run variation.", ""]
    return "\n".join(lines)
