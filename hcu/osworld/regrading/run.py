"""A run's kept final desktops regraded: every attempt in tasks/ that kept its final desktop (or those of the tasks
asked for), each restored in a fresh guest and scored by its task file's evaluator as it is now; regrade.json
beside each result.json, and `<run>/regrade/summary.md` listing every score that changed.

Nothing starts before the whole selection is checked: a run directory without a config, a task the run does not
have, or a selection without a kept desktop is refused in one line (RegradeRefused).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest_state import kept
from hcu.osworld.guest_state.kept import KeptDesktop
from hcu.osworld.records.identity import AttemptId, repeat_key
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.layout import REGRADE_FILE, RESULT_FILE
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.records.result import TaskResult
from hcu.osworld.regrading.attempt import RegradeSettings, regrade
from hcu.osworld.run_config import ConfigError, RunConfig, TaskSpec, stored_config
from hcu.record_io import read_record, write_atomic, write_record

REGRADE_DIR = "regrade"
"""In the run directory: each regrade's own files (`<task>/`) and summary.md."""


class RegradeRefused(HcuOSWorldError):
    """A regrade that cannot start; one line naming what is wrong."""


@dataclass(frozen=True)
class KeptAttempt:
    task: TaskSpec
    repeat: int
    folder: Path
    """The attempt's folder in tasks/."""
    desktop: KeptDesktop
    score_before: float | None


def load_run(run_dir: Path) -> RunConfig:
    try:
        return stored_config(run_dir)
    except ConfigError as exc:
        raise RegradeRefused(str(exc)) from None


def kept_attempts(config: RunConfig, task_ids: list[str] | None) -> list[KeptAttempt]:
    """The attempts of the selection that kept a complete final desktop; refused when there is none."""
    known = {task.id: task for task in config.tasks}
    for task_id in task_ids or []:
        if task_id not in known:
            raise RegradeRefused(f"--tasks: {task_id} is not a task of run {config.run_id}")
    found = []
    for task in (known[t] for t in task_ids) if task_ids else config.tasks:
        for repeat in range(1, config.repeats_of(task) + 1):
            folder = config.run_dir / "tasks" / repeat_key(task.id, repeat)
            desktop = kept.read(folder)
            if desktop is not None:
                result = folder / RESULT_FILE
                before = read_record(result, TaskResult).score if result.is_file() else None
                found.append(KeptAttempt(task, repeat, folder, desktop, before))
    if not found:
        which = ", ".join(task_ids) if task_ids else "its tasks"
        raise RegradeRefused(f"{config.run_dir}: no kept final desktop for {which} (keep_final_desktop is "
                             f"{config.keep_final_desktop}; a desktop is kept when its attempt ran with it)")
    return found


def regrade_run(config: RunConfig, attempts: list[KeptAttempt], *, stops: StopSignals,
                osworld_python: Path | None = None) -> list[Regrade]:
    """Regrade each attempt in turn (its phases' deadlines are this process's alarm: one at a time), writing
    regrade.json beside its result, then the run's summary."""
    work = config.run_dir / REGRADE_DIR

    def one(item: KeptAttempt) -> Regrade:
        guest_id = regrade_guest(config, item, "regrade")
        settings = RegradeSettings.of(config.task_settings(item.task))
        if osworld_python is not None:
            settings = settings.model_copy(update={"osworld_python": osworld_python})
        record = regrade(settings, item.desktop, guest_id, score_before=item.score_before,
                         work_dir=work / item.folder.name, stops=stops)
        write_record(item.folder / REGRADE_FILE, record)
        return record

    records = []
    for item in attempts:
        if stops.received:
            break
        records.append(one(item))
    write_atomic(work / "summary.md", summary_text(config, records).encode())
    return records


def regrade_guest(config: RunConfig, item: KeptAttempt, use: str) -> AttemptId:
    """The identity of a guest restored from `item` for `use` (regrade, open): labelled `<run>.<use>` for
    cleanup, numbered by this process, so two commands on one run at once never take each other's guest."""
    return AttemptId(run_id=f"{config.run_id}.{use}", task_id=item.task.id, repeat=item.repeat, attempt=os.getpid())


def summary_text(config: RunConfig, records: list[Regrade]) -> str:
    changed = [r for r in records if r.changed]
    lines = [f"# Regrade of {config.run_id}", "",
             f"{len(records)} kept final desktops regraded with the task files in {config.tasks_dir} as they are "
             f"now; {len(changed)} scores changed. No agent ran and no model was called. Each attempt's first "
             "grading stays in its result.json; regrade.json beside it holds the new one.", "",
             "| task | repeat | before | after | status | evaluator changed | task file changed |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (not r.changed, r.task_id, r.repeat)):
        lines.append(f"| {r.task_id} | {r.repeat} | {_score(r.score_before)} | {_score(r.score_after)} | "
                     f"{r.status}{' (changed)' if r.changed else ''} | "
                     f"{_yes(r.evaluator_sha256_now, r.evaluator_sha256_then)} | "
                     f"{_yes(r.task_sha256_now, r.task_sha256_then)} |")
    return "\n".join(lines) + "\n"


def _score(value: float | None) -> str:
    return "withheld" if value is None else f"{value:g}"


def _yes(now: str | None, then: str) -> str:
    return "?" if now is None else "yes" if now != then else "no"
