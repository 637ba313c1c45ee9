"""What the queue knows about one task, read from disk only, so a restarted queue sees what the last one saw.

A task's current attempt lives in `tasks/<task-id>/`; earlier attempts that infrastructure cut short live in
`retries/<task-id>-<n>/`. The runner writes `attempt.json` (an `AttemptLease`) before anything else; the
lease names the process, so a new queue can tell a live attempt (adopt it) from a dead one (retry it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
from pydantic import ValidationError

from hcu.osworld.attempt.lease import AttemptLease, current_host
from hcu.osworld.attempt.result import TaskResult, result_if_readable
from hcu.osworld.errors import MAX_ATTEMPTS, policy_for
from hcu.record_io import Record, read_record

TaskState = Literal["pending", "active", "finished", "interrupted", "infra_failed", "config_failed", "exhausted",
                    "foreign"]
"""config_failed: ended on a class that stops the queue (errors.py); foreign: leased by a runner on another
host, whose process this host cannot see."""


class RetryNote(Record):
    """retry.json in `retries/<task-id>-<n>/`: why the queue set this attempt aside."""

    task_id: str
    attempt: int
    failure_classification: str
    reason: str
    moved_at: float
    pause_launches_sec: float = 0.0


@dataclass
class TaskView:
    """One task as found on disk."""

    task_id: str
    state: TaskState
    attempt: int
    """The attempt in tasks/<id>/ now, or the one that would run next."""
    retries: int
    lease: AttemptLease | None = None
    result: TaskResult | None = None
    pid: int | None = None


def runs_attempt(pid: int, result_dir: Path) -> bool:
    """True when `pid` is a live (not zombie) process whose command line names `result_dir`.

    Checking the command line guards against pid reuse: a recycled pid will not carry our result dir."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and str(result_dir).encode() in cmdline.split(b"\0")


def find_runner_pid(result_dir: Path) -> int | None:
    """A live process running the attempt in `result_dir`, found by its command line (no lease yet)."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and runs_attempt(int(entry.name), result_dir):
            return int(entry.name)
    return None


def retry_numbers(run_dir: Path, task_id: str) -> list[int]:
    """The attempt numbers already set aside under retries/ for this task."""
    pattern = re.compile(re.escape(task_id) + r"-(\d+)")
    numbers = []
    for path in (run_dir / "retries").glob(f"{glob_escape(task_id)}-*"):
        match = pattern.fullmatch(path.name)
        if match:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def read_lease(path: Path) -> AttemptLease | None:
    try:
        return read_record(path, AttemptLease)
    except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
        return None


def scan_task(run_dir: Path, task_id: str) -> TaskView:
    """Classify one task from its directories and, for a live attempt, its process."""
    used = retry_numbers(run_dir, task_id)
    attempt = (max(used) if used else 0) + 1
    task_dir = run_dir / "tasks" / task_id
    view = TaskView(task_id=task_id, state="pending", attempt=attempt, retries=len(used))
    if not task_dir.is_dir():
        view.state = "exhausted" if attempt > MAX_ATTEMPTS else "pending"
        return view
    view.result = result_if_readable(task_dir / "result.json")
    if view.result is not None:
        policy = policy_for(view.result.failure_classification)
        if policy.stop_queue:
            view.state = "config_failed"
        elif not policy.retry:
            view.state = "finished"
        else:  # the last allowed attempt stays in tasks/, unscored
            view.state = "infra_failed" if attempt < MAX_ATTEMPTS else "exhausted"
        return view
    view.lease = read_lease(task_dir / "attempt.json")
    if view.lease is not None and view.lease.host != current_host():
        view.state = "foreign"
        return view
    pid = view.lease.pid if view.lease else find_runner_pid(task_dir.resolve())
    if pid is not None and runs_attempt(pid, task_dir.resolve()):
        view.state, view.pid = "active", pid
    else:
        view.state = "interrupted"
    return view


def read_retry_notes(run_dir: Path) -> dict[str, RetryNote | None]:
    """retries/<name>/retry.json by directory name (None where the note is missing or unreadable)."""
    notes: dict[str, RetryNote | None] = {}
    for path in sorted((run_dir / "retries").glob("*")):
        if path.is_dir():
            try:
                notes[path.name] = read_record(path / "retry.json", RetryNote)
            except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
                notes[path.name] = None
    return notes
