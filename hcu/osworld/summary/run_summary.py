"""A run's summary behind `python -m hcu.osworld.summarize`: honest scores for a run directory.

Writes RUN_DIR/summary/summary.json, tasks.csv (one row per repeat of each task) and summary.md (and, with
--compare and --rerun-discordant, configs that re-run just the tasks the two runs disagree on). Scoring rules
are in rows.py, repeats and their statistics in repeats.py, intervals in stats.py, the figures of a set of tasks
in groups.py, cost in cost.py, what attempts without a valid result spent and the rate-limit waits in waste.py, the
do-nothing baseline in baseline.py; summary.json is the model in model.py, built here (`summarize_rows`).

A task's score is the mean of its repeats; the run's score is the mean of the task scores over every config
task (withheld, with bounds, while any repeat lacks a usable score). With one repeat per task every figure is
what it was before repeats existed.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from hcu.defaults import RETRIES
from hcu.osworld.errors import LIMIT_TERMINATIONS, POLICIES, HcuOSWorldError, policy_for
from hcu.osworld.records.manifest import REPEAT_POLICY
from hcu.osworld.records.sweep_file import SweepFile, SweepUnreadable, read_sweep
from hcu.osworld.run_config import ConfigError, RunConfig, stored_config
from hcu.osworld.summary.baseline import baseline_figures, untouched_of
from hcu.osworld.summary.compare import compare
from hcu.osworld.summary.cost import CostFigures, cost_figures
from hcu.osworld.summary.groups import group_stats, grouped
from hcu.osworld.summary.model import RunSummary
from hcu.osworld.summary.parts import (
    Baseline,
    ClassCount,
    ClusterBootstrapInterval,
    RateLimitWaits,
    ReadNothingTask,
    Regraded,
    RegradedScore,
    RetriedSpend,
    TokenTotals,
    WithheldTask,
)
from hcu.osworld.summary.repeats import (
    TaskScores,
    per_task,
    run_k,
    run_pass,
    task_scores,
    variance_terms,
)
from hcu.osworld.summary.report import render_markdown
from hcu.osworld.summary.rows import AttemptRow, RetriedAttempt, load_rows
from hcu.osworld.summary.run import Run
from hcu.osworld.summary.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, cluster_bootstrap, mean_interval
from hcu.osworld.summary.waste import (
    TOKEN_FIELDS,
    ValidResults,
    rate_limit_waits,
    token_log_of,
    wasted_spend,
    withheld_attempts,
)
from hcu.record_io import write_atomic, write_json

CSV_COLUMNS = ("task_id", "repeat", "domain", "stratum", "status", "score", "evaluator_score", "withheld_reason",
               "termination", "failure_class", "attempts", "model_calls", "tokens", "input_tokens",
               "output_tokens", "duration_sec", "getters_read_nothing", "cost_usd", "task_mean",
               "task_repeats_scored")
BASELINE_COLUMNS = ("untouched", "untouched_score")
"""With a do-nothing baseline: how the task's untouched state scored (passes, fails, unknown) and the score."""


class SummaryError(HcuOSWorldError):
    """RUN_DIR is not a run directory this tool can read; one line."""


def load_run_config(run_dir: Path) -> RunConfig:
    """The run's stored config; a bad one is refused in run_queue's own line, naming the key."""
    try:
        return stored_config(run_dir)
    except ConfigError as exc:
        raise SummaryError(str(exc)) from None


def _token_sums(usages: list[Any]) -> dict[str, int]:
    return {name: sum(getattr(u, name) for u in usages) for name in TOKEN_FIELDS}


def _retried_spend(retried: list[RetriedAttempt], cost_usd: float | None) -> RetriedSpend:
    """What attempts set aside under retries/ spent: never scored, part of the campaign's cost."""
    usages = [r.usage for r in retried if r.usage is not None]
    accounted = [u for u in usages if u.fully_accounted]
    tokens = _token_sums(accounted)
    return RetriedSpend(attempts=len(retried), machine_sec=sum(r.duration_sec or 0.0 for r in retried),
                        model_calls=sum(u.model_calls for u in usages), accounted_attempts=len(accounted),
                        **tokens, total=tokens["input_tokens"] + tokens["output_tokens"], cost_usd=cost_usd)


def _spend(rows: list[AttemptRow], retried: list[RetriedAttempt]) -> dict[str, Any]:
    """The spend keys of summary.json (retried apart)."""
    valid = sum(1 for row in rows if row.valid)
    unknown = sum(1 for r in retried if r.duration_sec is None)
    machine = sum(row.duration_sec or 0.0 for row in rows) + sum(r.duration_sec or 0.0 for r in retried)
    accounted = [row for row in rows if row.usage_accounted]
    accounted_valid = sum(1 for row in accounted if row.valid)
    tokens = {name: sum(getattr(row, name) for row in accounted) for name in TOKEN_FIELDS}
    total_tokens = tokens["input_tokens"] + tokens["output_tokens"]
    return {"machine_sec": machine, "machine_sec_per_valid_result": machine / valid if valid else None,
            "attempts_without_duration": unknown + sum(1 for row in rows if row.attempts and
                                                       row.duration_sec is None),
            "model_calls": sum(row.model_calls or 0 for row in rows),
            "tokens": TokenTotals(accounted_tasks=len(accounted), **tokens, total=total_tokens,
                                  per_valid_result=total_tokens / accounted_valid if accounted_valid else None)}


def _withheld_reason(task: TaskScores) -> str:
    missing = [row for row in task.rows if not row.valid]
    if task.repeats == 1 and missing:
        return missing[0].withheld_reason
    return "; ".join(f"repeat {row.repeat}: {row.withheld_reason}" for row in missing)


def _repeat_figures(tasks: list[TaskScores], interval_of: Literal["score", "lower_bound"],
                    cost: CostFigures) -> dict[str, Any]:
    """The keys repeats add: k, the policy, per-task rows (with their cost), pass@k and pass^k, both variance
    terms, the cluster bootstrap interval."""
    k = run_k(tasks)
    rows = per_task(tasks, k, cost.per_task)
    terms = variance_terms(tasks)
    values = [task.mean if interval_of == "score" else task.lower for task in tasks]
    drawn = cluster_bootstrap(values)  # type: ignore[arg-type]
    return {"repeats": k, "repeat_policy": REPEAT_POLICY, "per_task": rows,
            "pass_at_k": run_pass([row.pass_at_k for row in rows]),
            "pass_hat_k": run_pass([row.pass_hat_k for row in rows]),
            "run_to_run_sd": terms.run_to_run_sd, "task_list_sd": terms.task_list_sd,
            "cluster_bootstrap_ci95": ClusterBootstrapInterval(**drawn.model_dump(), of=interval_of,
                                                               resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)}


def is_repeated(tasks: list[TaskScores]) -> bool:
    """Whether the run has repeats: its intervals are then the cluster bootstrap's."""
    return any(task.repeats > 1 for task in tasks)


def summarize_rows(config: RunConfig, tasks: list[TaskScores], retried: list[RetriedAttempt],
                   cost: CostFigures, baseline: Baseline | None = None,
                   waits: RateLimitWaits | None = None) -> RunSummary:
    """summary.json from the rows; `waits`: the token log's rate-limit waits (`waste.rate_limit_waits`)."""
    rows = [row for task in tasks for row in task.rows]
    repeated = is_repeated(tasks)
    overall = group_stats(tasks, repeated)
    zeroed = [row for row in rows if row.termination in LIMIT_TERMINATIONS and row.valid]
    spend, set_aside = _spend(rows, retried), _retried_spend(retried, cost.retried)
    return RunSummary(
        run_id=config.run_id, benchmark_version=config.benchmark_version, agent=config.agent,
        model=config.model, effort=config.effort, scripted_model=config.scripted_model,
        **overall.model_dump(),
        binary_ci95=mean_interval([task.successes / task.repeats for task in tasks]),
        statuses=Counter(row.status for row in rows),
        terminations=Counter(row.termination for row in rows if row.termination),
        failure_classes=Counter(row.failure_class for row in rows if row.failure_class),
        zeroed_by_budget_or_timeout=len(zeroed),
        zeroed_though_evaluator_passed=sum(1 for row in zeroed if (row.evaluator_score or 0) > 0),
        withheld_tasks=[WithheldTask(task_id=task.task_id, reason=_withheld_reason(task))
                        for task in tasks if not task.complete],
        read_nothing_tasks=[ReadNothingTask(task_id=row.key, getters=row.getters_read_nothing, score=row.score)
                            for row in rows if row.getters_read_nothing],
        attempts=sum(row.attempts for row in rows),
        retried_tasks=sum(1 for task in tasks if any(row.attempts > 1 for row in task.rows)),
        attempts_by_class=attempts_by_class(rows, retried),
        **spend, retried=set_aside,
        by_domain=grouped(tasks, "domain", repeated), by_stratum=grouped(tasks, "stratum", repeated),
        retry_policy=RETRIES.policy,
        **_repeat_figures(tasks, overall.ci95.of, cost),  # type: ignore[union-attr]
        cost_usd=cost.run, cost_per_valid_result_usd=cost.per_valid_result,
        wasted=wasted_spend(set_aside, withheld_attempts(rows), cost.wasted, cost.wasted_unknown, cost.run,
                            spend["tokens"].total + set_aside.total, spend["model_calls"] + set_aside.model_calls),
        rate_limit_waits=waits, baseline=baseline, regraded=regraded(rows),
    )


def regraded(rows: list[AttemptRow]) -> Regraded | None:
    """The repeats a regrade scored, with their first grading; None when the run has no regrade."""
    tried = [row for row in rows if row.regrade is not None]
    if not tried:
        return None
    scored = [RegradedScore(task_id=row.key, first_score=row.first_score, score=row.score)
              for row in tried if row.regrade is not None and row.regrade.status != "error"]
    return Regraded(attempts=scored, changed=sum(1 for r in scored if r.first_score != r.score),
                    not_regraded=len(tried) - len(scored))


def attempts_by_class(rows: list[AttemptRow], retried: list[RetriedAttempt]) -> dict[str, ClassCount]:
    """How many attempts ended in each class (tasks/ and retries/), with what the error table does with it."""
    counts = Counter(row.ended_as for row in rows if row.ended_as) + Counter(r.failure_class for r in retried)
    out = {}
    for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        known = name in POLICIES or name == "clean"
        policy = policy_for(None if name == "clean" else name)
        out[name] = ClassCount(attempts=count, retried=policy.retry if known else None,
                               scored=policy.scored if known else None)
    return out


def read_baseline(run_dir: Path, config: RunConfig, baseline_dir: Path | None) -> tuple[Path, SweepFile] | None:
    """The sweep `--baseline` names, else the config's `baseline`; SummaryError naming the flag or the key when it
    is not a canary sweep's folder."""
    path, key = ((baseline_dir, "--baseline") if baseline_dir is not None
                 else (config.baseline, f"{run_dir / 'config.json'}: baseline"))
    if path is None:
        return None
    try:
        return path, read_sweep(path)
    except SweepUnreadable as exc:
        raise SummaryError(f"{key}: {exc}") from None


def load_run(run_dir: Path, baseline_dir: Path | None = None) -> Run:
    """The run's rows and summary; with the do-nothing baseline of `baseline_dir` (a canary sweep), else of the
    config's `baseline`."""
    config = load_run_config(run_dir)
    sweep = read_baseline(run_dir, config, baseline_dir)
    rows, retried = load_rows(config, run_dir)
    made_with_stand_ins = [row.key for row in rows if row.stand_ins]
    if made_with_stand_ins:
        raise SummaryError(f"{run_dir}: {len(made_with_stand_ins)} result(s) were made with stand-in assets "
                           f"(generated task files, e.g. task {made_with_stand_ins[0]}): not a scored run")
    tasks = task_scores(config, rows)
    cost = cost_figures(config, tasks, retried, sum(len(task.scores) for task in tasks))
    baseline = (baseline_figures(sweep[0].resolve(), sweep[1], tasks, config.benchmark_version, is_repeated(tasks))
                if sweep is not None else None)
    results = ValidResults.of(str(config.run_id), (task.id for task in config.tasks), rows, (r.name for r in retried))
    waits = rate_limit_waits(token_log_of(run_dir, config.token_log), results)
    return Run(run_dir, config, rows, tasks, summarize_rows(config, tasks, retried, cost, baseline, waits),
               cost.note)


def write_csv(path: Path, run: Run) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    baseline = run.summary.baseline
    columns = CSV_COLUMNS + (BASELINE_COLUMNS if baseline is not None else ())
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for task in run.tasks:
            untouched, untouched_score = untouched_of(baseline, task.task_id)
            extra = {"task_mean": task.mean, "task_repeats_scored": len(task.scores), "untouched": untouched,
                     "untouched_score": untouched_score}
            for row in task.rows:
                values = [extra[c] if c in extra else getattr(row, c) for c in columns]
                writer.writerow(["" if value is None else value for value in values])


def summarize(run_dir: Path, compare_dir: Path | None = None, rerun_discordant: int | None = None,
              baseline_dir: Path | None = None) -> dict[str, Any]:
    """Write summary/ for a run directory and return summary.json's content; `baseline_dir`: a canary sweep
    whose untouched scores are the do-nothing baseline (default: the config's `baseline`)."""
    run = load_run(run_dir, baseline_dir)
    if compare_dir is not None:
        run.summary.compare = compare(run, load_run(compare_dir), rerun_discordant)
    out = run_dir / "summary"
    write_csv(out / "tasks.csv", run)
    content = run.summary.to_json()
    write_json(out / "summary.json", content)
    write_atomic(out / "summary.md", render_markdown(run.summary, run.tasks, run.cost_note).encode())
    return content
