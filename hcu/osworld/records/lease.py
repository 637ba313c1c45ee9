"""attempt.json: the lease a runner writes before anything else, naming its process and host, so a queue that
restarts can tell a live attempt (adopt it) from a dead one (retry it)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from hcu.osworld.records.identity import AttemptId
from hcu.record_io import Record


class AttemptLease(Record):
    """attempt.json: written by the runner first, read by the queue on resume."""

    attempt_id: str
    run_id: str
    task_id: str
    attempt: int
    repeat: int = 1
    pid: int
    """The runner process; alive (and still running this attempt) means the attempt is live."""
    host: str
    started_at: float
    """Unix time the runner started the attempt."""
    result_dir: str


def current_host() -> str:
    return socket.gethostname()


def lease_for_this_process(attempt: AttemptId, result_dir: Path) -> AttemptLease:
    """The lease a runner writes for itself."""
    return AttemptLease(attempt_id=str(attempt), run_id=attempt.run_id, task_id=attempt.task_id,
                        attempt=attempt.attempt, repeat=attempt.repeat, pid=os.getpid(), host=current_host(),
                        started_at=time.time(), result_dir=str(result_dir))
