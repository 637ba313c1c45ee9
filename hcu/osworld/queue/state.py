"""What the queue knows about one repeat of a task, read from disk only, so a restarted queue sees what the last
one saw.

A repeat's current attempt lives in `tasks/<key>/` (the key is the task id for repeat 1, `<task-id>.r<n>` for
repeat n >= 2: identity.repeat_key); earlier attempts that infrastructure cut short live in
`retries/<key>-<n>/`. The runner writes `attempt.json` (an `AttemptLease`) before anything else; the
lease names the process, so a new queue can tell a live attempt (adopt it) from a dead one (retry it). An
attempt on a Ray node has `placement.json` instead, naming its slot reservation there; the executor tells.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
from pydantic import ValidationError

from hcu.defaults import RETRIES
from hcu.osworld.errors import policy_for
from hcu.osworld.records.identity import repeat_key
from hcu.osworld.records.layout import LEASE_FILE, RESULT_FILE
from hcu.osworld.records.lease import AttemptLease, current_host
from hcu.osworld.records.result import RecordedFailureClass, TaskResult, result_if_readable
from hcu.record_io import Record, read_record

TaskState = Literal["pending", "active", "placed", "finished", "interrupted", "infra_failed", "config_failed",
                    "exhausted", "foreign"]
"""placed: started by the ray executor (the executor tells live from lost); config_failed: ended on a class
that stops the queue (errors.py); foreign: leased by a runner on another host, whose process this host cannot
see."""


class Placement(Record):
    """placement.json in `tasks/<task-id>/`: an attempt the ray executor runs on a node. Written before its
    slot is reserved, so a restarted queue finds the slot by name; updated once its node is known."""

    attempt_id: str
    task_id: str
    attempt: int
    actor_name: str
    """The attempt's name in Ray: its runner on the node."""
    slot: str
    """The run's slot reservation the attempt holds (a detached placement group, kept for the run's next
    attempts once this one is done)."""
    namespace: str
    launched_at: float
    node: str | None = None
    """The node's name (manifest.json's nodes); None until the attempt started there."""
    ray_node_id: str | None = None
    runner_pid: int | None = None
    """The runner's process on that node."""
    repeat: int = 1


class RetryNote(Record):
    """retry.json in `retries/<key>-<n>/`: why the queue set this attempt aside."""

    task_id: str
    attempt: int
    failure_classification: RecordedFailureClass
    reason: str
    moved_at: float
    pause_launches_sec: float = 0.0
    repeat: int = 1
    cost_usd: float | None = None
    """What the attempt's token-log rows cost when it was set aside (None: unknown); a result.json the attempt
    left says it too."""


@dataclass
class TaskView:
    """One repeat of a task as found on disk."""

    task_id: str
    state: TaskState
    attempt: int
    """The attempt in tasks/<key>/ now, or the one that would run next."""
    retries: int
    lease: AttemptLease | None = None
    result: TaskResult | None = None
    pid: int | None = None
    placement: Placement | None = None
    repeat: int = 1

    @property
    def key(self) -> str:
        return repeat_key(self.task_id, self.repeat)


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


def retry_numbers(run_dir: Path, key: str) -> list[int]:
    """The attempt numbers already set aside under retries/ for this repeat (`key`: its folder name)."""
    pattern = re.compile(re.escape(key) + r"-(\d+)")
    numbers = []
    for path in (run_dir / "retries").glob(f"{glob_escape(key)}-*"):
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


def read_placement(task_dir: Path) -> Placement | None:
    try:
        return read_record(task_dir / "placement.json", Placement)
    except (FileNotFoundError, orjson.JSONDecodeError, ValidationError):
        return None


def scan_task(run_dir: Path, task_id: str, repeat: int = 1) -> TaskView:
    """Classify one repeat of a task from its directories and, for a live attempt, its process."""
    key = repeat_key(task_id, repeat)
    used = retry_numbers(run_dir, key)
    attempt = (max(used) if used else 0) + 1
    task_dir = run_dir / "tasks" / key
    view = TaskView(task_id=task_id, state="pending", attempt=attempt, retries=len(used), repeat=repeat)
    if not task_dir.is_dir():
        view.state = "exhausted" if attempt > RETRIES.attempts else "pending"
        return view
    view.result = result_if_readable(task_dir / RESULT_FILE)
    if view.result is not None:
        policy = policy_for(view.result.failure_classification)
        if policy.stop_queue:
            view.state = "config_failed"
        elif not policy.retry:
            view.state = "finished"
        else:  # the last allowed attempt stays in tasks/, unscored
            view.state = "infra_failed" if attempt < RETRIES.attempts else "exhausted"
        return view
    view.placement = read_placement(task_dir)
    if view.placement is not None:
        view.state = "placed"
        return view
    view.lease = read_lease(task_dir / LEASE_FILE)
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
