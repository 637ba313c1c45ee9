"""Where the queue's events and figures go. Every decision of the queue is one event (start, adopt, launch, exit,
set_aside, limit, held, control, ...), offered in order to each of the queue's sinks: logs/queue.jsonl first,
then whatever watches the run (the terminal view, the plain-line log); its figures (queue/snapshot.py) are
offered after each status write. A sink is called on the queue's own thread and must be cheap."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import orjson

from hcu.osworld.queue.snapshot import QueueSnapshot

QUEUE_LOG = Path("logs") / "queue.jsonl"


class QueueSink(Protocol):
    def event(self, record: Mapping[str, object]) -> None:
        """One event as queue.jsonl holds it: {"at": ..., "event": ..., fields...}."""

    def figures(self, snapshot: QueueSnapshot) -> None:
        """The queue's figures, after each status write (at most once a second, and when the queue stops)."""

    def close(self) -> None:
        """The queue is done with this sink (it exited, or was stopped)."""


class EventLog:
    """logs/queue.jsonl: one line per event, appended as it happens."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / QUEUE_LOG

    def event(self, record: Mapping[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            f.write(orjson.dumps(record) + b"\n")

    def figures(self, snapshot: QueueSnapshot) -> None:
        pass

    def close(self) -> None:
        pass
