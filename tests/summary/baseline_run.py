"""A run and a canary sweep of its tasks with known figures, for the do-nothing baseline's tests: sweep.json is
written by the sweep's own report writer from canary reports."""

from __future__ import annotations

from pathlib import Path

from hcu.osworld.canary import sweep_report
from hcu.osworld.canary.sweep import SweepOptions, SweepState, report_path, select_tasks
from hcu.record_io import write_record
from tests.canary.test_sweep_logic import report
from tests.official_tasks import OFFICIAL_TASKS
from tests.summary.conftest import make_repeat_run, ok

NOT_SWEPT = "not-in-the-sweep"


def make_sweep(root: Path) -> tuple[Path, list[str]]:
    """A sweep of the first six os tasks: 0 untouched, 1.0 untouched, 0 with a getter that read nothing, a setup
    failure (not evaluated), one not run yet, 0.5 untouched. Returns its folder and the six ids in that order."""
    opts = SweepOptions.model_validate({"out": root / "sweep", "tasks_dir": OFFICIAL_TASKS, "test_desktop": True,
                                        "domains": ["os"], "per_domain": 6})
    tasks = select_tasks(opts)
    canaries = [report(tasks[0], "passed", score=0.0, stand_ins=False),
                report(tasks[1], "passed", score=1.0, stand_ins=False),
                report(tasks[2], "failed", score=0.0, classification="evaluator", empty=["vm_file"],
                       error="the evaluator could not read the state: vm_file: 404", stand_ins=False),
                report(tasks[3], "failed", classification="setup", error="setup step 2 (download) failed",
                       stand_ins=False),
                None,
                report(tasks[5], "passed", score=0.5, stand_ins=False)]
    for task, canary in zip(tasks, canaries, strict=True):
        if canary is not None:
            write_record(report_path(opts.out, task), canary)
    sweep_report.write(opts.out, tasks, SweepState(run_id="sweep-base", settings={"test_desktop": True}))
    return opts.out, [task.id for task in tasks]


def make_run(root: Path, ids: list[str], repeats: int = 1, **config: object) -> Path:
    """Agent scores 1, 1, 0, 1, 0, 1 on the six swept tasks and 1 on a task the sweep does not hold."""
    scores = dict(zip([*ids, NOT_SWEPT], [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0], strict=True))
    tasks = [{"id": task_id, "task_domain": "os" if task_id != NOT_SWEPT else "chrome"} for task_id in scores]
    return make_repeat_run(root, "based", {task_id: [ok(score)] * repeats for task_id, score in scores.items()},
                           tasks=tasks, **config)
