"""Two runs of the same tasks compared task by task, and the configs that re-run only the tasks they disagree on.

A comparison is decided by the discordant tasks alone (tasks both runs score alike cancel in the difference),
so after a first pass the machine time worth buying is more repeats of exactly those: `--rerun-discordant K`
writes each run's config with K more repeats on them, under the same run ids, so `run_queue` on each runs only
the added repeats and the next comparison pools them with the earlier ones. The difference's sign is settled
once its 95% interval excludes 0.
"""

from __future__ import annotations

from typing import Any

from hcu.osworld.summary.parts import Comparison, DiscordantTask
from hcu.osworld.summary.repeats import TaskScores, means_differ
from hcu.osworld.summary.run import Run
from hcu.osworld.summary.stats import paired_difference
from hcu.record_io import write_json


def rerun_config(run: Run, task_ids: set[str], more: int) -> dict[str, Any]:
    """The run's config (same run id, same run directory) with `more` repeats on `task_ids`."""
    body = run.config.model_dump(mode="json")
    by_id = {task.id: task for task in run.config.tasks}
    for task in body["tasks"]:
        if task["id"] in task_ids:
            task["repeats"] = run.config.repeats_of(by_id[task["id"]]) + more
    body["tasks"] = [{k: v for k, v in task.items() if v is not None} for task in body["tasks"]]
    return {key: value for key, value in body.items() if value is not None}


def write_reruns(run: Run, other: Run, task_ids: set[str], more: int) -> list[str]:
    """Both runs' configs with `more` repeats on `task_ids`, in this run's summary/ folder."""
    out = run.run_dir / "summary"
    written = []
    for source, name in ((run, "rerun-discordant.json"), (other, f"rerun-discordant-{other.config.run_id}.json")):
        write_json(out / name, rerun_config(source, task_ids, more))
        written.append(str(out / name))
    return written


def _pairs(run: Run, other: Run) -> tuple[list[tuple[TaskScores, TaskScores]], list[tuple[TaskScores, TaskScores]]]:
    theirs = {task.task_id: task for task in other.tasks}
    common = [(mine, theirs[mine.task_id]) for mine in run.tasks if mine.task_id in theirs]
    return common, [(a, b) for a, b in common if a.complete and b.complete]


def compare(run: Run, other: Run, rerun_discordant: int | None = None) -> Comparison:
    """Paired comparison of task means on the tasks both configs hold and both runs scored in full."""
    common, pairs = _pairs(run, other)
    discordant = [(a, b) for a, b in pairs if means_differ(a.scores, b.scores)]
    diff = paired_difference([float(a.mean) for a, _ in pairs], [float(b.mean) for _, b in pairs])  # type: ignore[arg-type]
    interval = diff.interval
    settled = interval is not None and (interval.low > 0 or interval.high < 0)
    reruns = []
    if rerun_discordant and discordant:
        reruns = write_reruns(run, other, {a.task_id for a, _ in discordant}, rerun_discordant)
    return Comparison(
        other_run_id=other.config.run_id, other_run_dir=str(other.run_dir), this_run_dir=str(run.run_dir),
        common_tasks=len(common), paired_tasks=len(pairs),
        not_comparable=[a.task_id for a, b in common if not (a.complete and b.complete)],
        discordant=[DiscordantTask(task_id=a.task_id, score=a.mean, other_score=b.mean, repeats=len(a.scores),
                                   other_repeats=len(b.scores)) for a, b in discordant],
        this_better=sum(1 for a, b in discordant if a.mean > b.mean),  # type: ignore[operator]
        other_better=sum(1 for a, b in discordant if a.mean < b.mean),  # type: ignore[operator]
        mean_difference=diff.mean, ci95=interval, sign_settled=settled, score=run.summary.score,
        other_score=other.summary.score, rerun_configs=reruns)
