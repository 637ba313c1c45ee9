"""sweep.json and sweep.md: what the canary sweep found, overall and per domain (each domain's folder also
gets its own pair).

Per domain: how many tasks reached "evaluated" (setup passed and the official evaluator returned a score),
how many canaries passed (evaluated, and every getter read the state), the untouched-state scores (a nonzero
score on a feasible task is listed: a broken check, or a stand-in that matches the gold by accident), and
every failure with its classification and first error line. Reports made with stand-in assets say so at the
top of every file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from hcu.osworld.canary.attempt import CanaryReport
from hcu.osworld.canary.sweep import SweepState, read_report, report_path
from hcu.osworld.osworld_bridge.tasks import TaskDefinition
from hcu.osworld.records.sweep_file import SWEEP_FILE, SweepTask
from hcu.record_io import write_atomic, write_json

STAND_IN_BANNER = ("> **STAND-IN ASSETS.** Every task file came from `--asset-stand-ins`: generated files of the "
                   "right type, not the tasks' real files. These results check setup paths, applications and "
                   "getters offline; they are not scores and never part of a scored run.")


def _row(task: TaskDefinition, report: CanaryReport | None) -> dict[str, Any]:
    if report is None:
        return SweepTask(task_id=task.id, domain=task.domain, outcome="not run").model_dump(exclude_unset=True)
    evaluated = report.evaluator is not None
    row = SweepTask(
        task_id=task.id, domain=task.domain, status=report.status, evaluated=evaluated,
        outcome="passed" if report.status == "passed" else "evaluated, getter read nothing"
        if evaluated else f"failed ({report.failure_classification})",
        feasible=task.evaluator.get("func") != "infeasible",
        score=report.evaluator.score if report.evaluator is not None else None,
        failure_classification=report.failure_classification,
        error=(report.error or "").split("\n")[0][:400] or None,
        duration_sec=report.duration_sec, stand_ins=report.stand_ins,
        nonzero_exits=sum(1 for step in report.setup_steps for a in step.guest_answers
                          if a.returncode not in (None, 0)))
    if report.evaluator is not None:
        row.getters_read_nothing = [g.getter for g in report.evaluator.getters_read_nothing]
    return row.model_dump(exclude_unset=True)


def _domain(rows: list[dict[str, Any]]) -> dict[str, Any]:
    evaluated = [r for r in rows if r.get("evaluated")]
    return {
        "tasks": len(rows),
        "evaluated": len(evaluated),
        "passed": sum(1 for r in rows if r.get("status") == "passed"),
        "getter_read_nothing": sum(1 for r in evaluated if r.get("getters_read_nothing")),
        "not_run": sum(1 for r in rows if r["outcome"] == "not run"),
        "untouched_scores": dict(Counter(f"{r['score']:g}" for r in evaluated)),
        "nonzero_untouched_feasible": [r["task_id"] for r in evaluated if r["feasible"] and r["score"]],
        "failures": dict(Counter(r["failure_classification"] for r in rows
                                 if r.get("status") == "failed" and not r.get("evaluated"))),
        "setup_commands_exiting_nonzero": sum(r.get("nonzero_exits", 0) for r in rows),
        "canary_sec": round(sum(r.get("duration_sec") or 0 for r in rows), 1),
    }


def build(out: Path, tasks: list[TaskDefinition], state: SweepState) -> dict[str, Any]:
    # an interrupted canary, or one whose guest failed, shows as a failure until the task runs again
    rows = [_row(task, read_report(report_path(out, task))) for task in tasks]
    domains = sorted({r["domain"] for r in rows})
    return {
        "run_id": state.run_id, "settings": state.settings,
        "stand_ins": bool(state.settings.get("asset_stand_ins")) or any(r.get("stand_ins") for r in rows),
        "wall_sec": round(sum(i.wall_sec for i in state.invocations), 1),
        "invocations": [i.model_dump() for i in state.invocations],
        "total": _domain(rows),
        "domains": {d: _domain([r for r in rows if r["domain"] == d]) for d in domains},
        "tasks": rows,
    }


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def markdown(sweep: dict[str, Any], title: str) -> str:
    lines = [f"# Canary sweep: {title}", ""]
    if sweep["stand_ins"]:
        lines += [STAND_IN_BANNER, ""]
    total = sweep["total"]
    lines += [f"{total['tasks']} tasks; **{total['evaluated']} evaluated** (setup passed, the evaluator returned "
              f"a score), {total['passed']} canaries passed (and every getter read the state). Wall time "
              f"{_minutes(sweep['wall_sec'])} over {len(sweep['invocations'])} invocation(s).", "",
              "| domain | tasks | evaluated | passed | getter read nothing | failed | untouched scores | "
              "nonzero on a feasible task |", "|---|---|---|---|---|---|---|---|"]
    for name, d in [*sweep["domains"].items(), ("total", total)]:
        failed = d["tasks"] - d["evaluated"] - d["not_run"]
        scores = ", ".join(f"{score}: {n}" for score, n in sorted(d["untouched_scores"].items())) or "-"
        lines.append(f"| {name} | {d['tasks']} | {d['evaluated']} | {d['passed']} | {d['getter_read_nothing']} | "
                     f"{failed} | {scores} | {len(d['nonzero_untouched_feasible'])} |")
    rows = sweep["tasks"]
    nonzero = [r for r in rows if r.get("evaluated") and r["feasible"] and r["score"]]
    if nonzero:
        lines += ["", "## Nonzero untouched score on a feasible task (a broken check or a stand-in collision)", ""]
        lines += [f"- {r['domain']}/{r['task_id']}: {r['score']:g}" for r in nonzero]
    empty = [r for r in rows if r.get("getters_read_nothing")]
    if empty:
        lines += ["", "## Evaluated, but a getter read nothing (the canary fails: the evaluator could not read "
                  "the state)", ""]
        lines += [f"- {r['domain']}/{r['task_id']}: {r['error']}" for r in empty]
    failed = [r for r in rows if r.get("status") == "failed" and not r.get("evaluated")]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- {r['domain']}/{r['task_id']} [{r['failure_classification']}]: {r['error']}" for r in failed]
    not_run = [r for r in rows if r["outcome"] == "not run"]
    if not_run:
        lines += ["", f"## Not run yet ({len(not_run)}): run the sweep again to resume", ""]
    lines.append("")
    return "\n".join(lines)


def write(out: Path, tasks: list[TaskDefinition], state: SweepState) -> dict[str, Any]:
    """sweep.json and sweep.md in `out`, and the same for each domain in `out/tasks/<domain>/`."""
    sweep = build(out, tasks, state)
    write_json(out / SWEEP_FILE, sweep)
    write_atomic(out / "sweep.md", markdown(sweep, state.run_id).encode())
    for domain in sweep["domains"]:
        part = {**sweep, "total": sweep["domains"][domain], "domains": {domain: sweep["domains"][domain]},
                "tasks": [r for r in sweep["tasks"] if r["domain"] == domain]}
        write_json(out / "tasks" / domain / SWEEP_FILE, part)
        write_atomic(out / "tasks" / domain / "sweep.md", markdown(part, f"{state.run_id}, {domain}").encode())
    return sweep
