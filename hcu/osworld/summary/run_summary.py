"""A run's summary behind `python -m hcu.osworld.summarize`: honest scores for a run directory.

Writes RUN_DIR/summary/summary.json, tasks.csv and summary.md (and, with --compare, configs that re-run just
the tasks the two runs disagree on). Scoring rules are in rows.py; intervals in stats.py.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from hcu.osworld.errors import LIMIT_TERMINATIONS, POLICIES, RETRY_POLICY, policy_for
from hcu.osworld.queue.config import RunConfig
from hcu.osworld.summary.report import render_markdown
from hcu.osworld.summary.rows import RetriedAttempt, TaskRow, load_rows
from hcu.osworld.summary.stats import mean_interval, paired_difference, wilson
from hcu.record_io import write_atomic, write_json

CSV_COLUMNS = ("task_id", "domain", "stratum", "status", "score", "evaluator_score", "withheld_reason",
               "termination", "failure_class", "attempts", "model_calls", "tokens", "input_tokens",
               "output_tokens", "duration_sec", "getters_read_nothing")


class SummaryError(Exception):
    """RUN_DIR is not a run directory this tool can read; one line."""


@dataclass
class Run:
    run_dir: Path
    config: RunConfig
    rows: list[TaskRow]
    summary: dict[str, Any]


def load_run_config(run_dir: Path) -> RunConfig:
    path = run_dir / "config.json"
    try:
        return RunConfig.model_validate(orjson.loads(path.read_bytes()))
    except FileNotFoundError:
        raise SummaryError(f"{run_dir}: no config.json (not a run directory)") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise SummaryError(f"{path}: unreadable run config ({type(exc).__name__})") from None


def group_stats(rows: list[TaskRow]) -> dict[str, Any]:
    """Score, bounds and coverage over a set of tasks; the denominator is every task in the set."""
    n = len(rows)
    scores = [row.score for row in rows if row.score is not None]
    total, withheld = sum(scores), n - len(scores)
    successes = sum(1 for score in scores if score == 1.0)
    per_task = n or 1
    return {"tasks": n, "valid": len(scores), "withheld": withheld, "coverage": len(scores) / per_task,
            "score": None if withheld else total / per_task, "lower_bound": total / per_task,
            "upper_bound": (total + withheld) / per_task,
            "valid_mean": total / len(scores) if scores else None, "raw_score_sum": total,
            "binary_successes": successes, "binary_rate": None if withheld else successes / per_task,
            "binary_rate_lower_bound": successes / per_task}


def _grouped(rows: list[TaskRow], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[TaskRow]] = {}
    for row in rows:
        groups.setdefault(getattr(row, key), []).append(row)
    return {name: group_stats(members) for name, members in sorted(groups.items()) if name}


def _retried_cost(retried: list[RetriedAttempt]) -> dict[str, Any]:
    """What attempts set aside under retries/ spent: never scored, part of the campaign's cost."""
    usages = [r.usage for r in retried if r.usage is not None]
    accounted = [u for u in usages if u.fully_accounted]
    tokens = {field: sum(getattr(u, field) for u in accounted)
              for field in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")}
    return {"attempts": len(retried), "machine_sec": sum(r.duration_sec or 0.0 for r in retried),
            "model_calls": sum(u.model_calls for u in usages), "accounted_attempts": len(accounted),
            **tokens, "total": tokens["input_tokens"] + tokens["output_tokens"]}


def _cost(rows: list[TaskRow], retried: list[RetriedAttempt]) -> dict[str, Any]:
    valid = sum(1 for row in rows if row.valid)
    retry_sec = sum(r.duration_sec or 0.0 for r in retried)
    unknown = sum(1 for r in retried if r.duration_sec is None)
    machine = sum(row.duration_sec or 0.0 for row in rows) + retry_sec
    accounted = [row for row in rows if row.usage_accounted]
    accounted_valid = sum(1 for row in accounted if row.valid)
    tokens = {field: sum(getattr(row, field) for row in accounted)
              for field in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")}
    total_tokens = tokens["input_tokens"] + tokens["output_tokens"]
    return {"machine_sec": machine, "machine_sec_per_valid_result": machine / valid if valid else None,
            "attempts_without_duration": unknown + sum(1 for row in rows if row.attempts and
                                                       row.duration_sec is None),
            "model_calls": sum(row.model_calls or 0 for row in rows),
            "tokens": {"accounted_tasks": len(accounted), **tokens, "total": total_tokens,
                       "per_valid_result": total_tokens / accounted_valid if accounted_valid else None},
            "retried": _retried_cost(retried)}


def summarize_rows(config: RunConfig, rows: list[TaskRow], retried: list[RetriedAttempt]) -> dict[str, Any]:
    overall = group_stats(rows)
    counted = [row.score if row.score is not None else 0.0 for row in rows]
    interval = mean_interval(counted)
    zeroed = [row for row in rows if row.termination in LIMIT_TERMINATIONS and row.valid]
    return {
        "run_id": config.run_id, "benchmark_version": config.benchmark_version, "agent": config.agent,
        "model": config.model, "effort": config.effort, "scripted_model": config.scripted_model,
        **overall,
        "ci95": {**interval.as_dict(), "of": "lower_bound" if overall["withheld"] else "score"},
        "binary_ci95": wilson(overall["binary_successes"], len(rows)).as_dict(),
        "statuses": dict(Counter(row.status for row in rows)),
        "terminations": dict(Counter(row.termination for row in rows if row.termination)),
        "failure_classes": dict(Counter(row.failure_class for row in rows if row.failure_class)),
        "zeroed_by_budget_or_timeout": len(zeroed),
        "zeroed_though_evaluator_passed": sum(1 for row in zeroed if (row.evaluator_score or 0) > 0),
        "withheld_tasks": [{"task_id": row.task_id, "reason": row.withheld_reason}
                           for row in rows if not row.valid],
        "read_nothing_tasks": [{"task_id": row.task_id, "getters": row.getters_read_nothing, "score": row.score}
                               for row in rows if row.getters_read_nothing],
        "attempts": sum(row.attempts for row in rows),
        "retried_tasks": sum(1 for row in rows if row.attempts > 1),
        "attempts_by_class": attempts_by_class(rows, retried),
        **_cost(rows, retried),
        "by_domain": _grouped(rows, "domain"), "by_stratum": _grouped(rows, "stratum"),
        "retry_policy": RETRY_POLICY,
    }


def attempts_by_class(rows: list[TaskRow], retried: list[RetriedAttempt]) -> dict[str, dict[str, Any]]:
    """How many attempts ended in each class (tasks/ and retries/), with what the error table does with it."""
    counts = Counter(row.ended_as for row in rows if row.ended_as) + Counter(r.failure_class for r in retried)
    out = {}
    for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        known = name in POLICIES or name == "clean"
        policy = policy_for(None if name == "clean" else name)
        out[name] = {"attempts": count, "retried": policy.retry if known else None,
                     "scored": policy.scored if known else None}
    return out


def load_run(run_dir: Path) -> Run:
    config = load_run_config(run_dir)
    rows, retried = load_rows(config, run_dir)
    made_with_stand_ins = [row.task_id for row in rows if row.stand_ins]
    if made_with_stand_ins:
        raise SummaryError(f"{run_dir}: {len(made_with_stand_ins)} result(s) were made with stand-in assets "
                           f"(generated task files, e.g. task {made_with_stand_ins[0]}): not a scored run")
    return Run(run_dir, config, rows, summarize_rows(config, rows, retried))


def rerun_config(run: Run, task_ids: list[str]) -> dict[str, Any]:
    """This run's config restricted to `task_ids`, under a new run_id and its own token log."""
    body = run.config.model_dump(mode="json", exclude={"token_log"})
    wanted = set(task_ids)
    body["tasks"] = [task for task in body["tasks"] if task["id"] in wanted]
    body["tasks"] = [{k: v for k, v in task.items() if v is not None} for task in body["tasks"]]
    body["run_id"] = f"{run.config.run_id}-discordant"
    return {key: value for key, value in body.items() if value is not None}


def compare(run: Run, other: Run) -> dict[str, Any]:
    """Paired comparison on the tasks both configs hold and both runs graded."""
    theirs = {row.task_id: row for row in other.rows}
    common = [(row, theirs[row.task_id]) for row in run.rows if row.task_id in theirs]
    pairs = [(a, b) for a, b in common if a.score is not None and b.score is not None]
    discordant = [(a, b) for a, b in pairs if a.score != b.score]
    diff = paired_difference([a.score for a, _ in pairs], [b.score for _, b in pairs])  # type: ignore[misc]
    out_dir = run.run_dir / "summary"
    reruns = []
    if discordant:
        ids = [a.task_id for a, _ in discordant]
        names = ("rerun-discordant.json", f"rerun-discordant-{other.config.run_id}.json")
        for source, name in zip((run, other), names, strict=True):
            write_json(out_dir / name, rerun_config(source, ids))
            reruns.append(str(out_dir / name))
    return {"other_run_id": other.config.run_id, "other_run_dir": str(other.run_dir),
            "common_tasks": len(common), "paired_tasks": len(pairs),
            "not_comparable": [a.task_id for a, b in common if a.score is None or b.score is None],
            "discordant": [{"task_id": a.task_id, "score": a.score, "other_score": b.score}
                           for a, b in discordant],
            "this_better": sum(1 for a, b in discordant if a.score > b.score),  # type: ignore[operator]
            "other_better": sum(1 for a, b in discordant if a.score < b.score),  # type: ignore[operator]
            "mean_difference": diff.mean,
            "ci95": diff.interval.as_dict() if diff.interval else None,
            "score": run.summary["score"], "other_score": other.summary["score"],
            "rerun_configs": reruns}


def write_csv(path: Path, rows: list[TaskRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(["" if getattr(row, column) is None else getattr(row, column)
                             for column in CSV_COLUMNS])


def summarize(run_dir: Path, compare_dir: Path | None = None) -> dict[str, Any]:
    """Write summary/ for a run directory and return summary.json's content."""
    run = load_run(run_dir)
    if compare_dir is not None:
        run.summary["compare"] = compare(run, load_run(compare_dir))
    out = run_dir / "summary"
    write_csv(out / "tasks.csv", run.rows)
    write_json(out / "summary.json", run.summary)
    write_atomic(out / "summary.md", render_markdown(run.summary).encode())
    return run.summary
