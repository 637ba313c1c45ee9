"""What the benchmarks' simulated executors share: a fresh run (nothing to adopt, nothing to settle) whose
attempts put their task key in `done` as they end."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from hcu.osworld.queue.executor import Lost
from hcu.osworld.queue.state import TaskView
from hcu.osworld.queue.status import ActiveAttempt


class FreshRun:
    """Mixed into an executor with a `lock` and a `done` set of task keys."""

    lock: threading.Lock
    done: set[str]

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        with self.lock:
            finished = [a.key for a in active if a.key in self.done]
            self.done.difference_update(finished)
        return finished

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        raise AssertionError("a fresh run adopts nothing")

    def settle(self, active: ActiveAttempt) -> Lost | None:
        return None
