"""Where attempts run. The panel queue (panel.py) decides what runs and when; an executor starts attempts,
tells which have stopped, brings their results into the run directory and removes what they leave.

- `LocalExecutor` (the default): runner processes on this host's Docker engine, in their own sessions, so a
  stopped queue leaves them running and the next one adopts them by the pid in their lease.
- `RayExecutor` (ray_executor.py, `executor: "ray"`): each attempt a detached Ray actor on a node advertising
  guest slots; imported only when a config asks for it, so the local path never imports Ray.

Nothing else in hcu knows which executor ran an attempt: both leave the same run directory layout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import Protocol

from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.attempt.lease import current_host
from hcu.osworld.guest.host import check_host
from hcu.osworld.queue.config import RunConfig, TaskSpec
from hcu.osworld.queue.containers import cleanup_attempt, run_attempts_with_containers
from hcu.osworld.queue.launch import runner_args, spawn
from hcu.osworld.queue.manifest import NodeInfo
from hcu.osworld.queue.state import TaskView, runs_attempt
from hcu.osworld.queue.status import ActiveAttempt


class QueueRefused(Exception):
    """The queue will not run on this directory; the message says why in one line."""


@dataclass(frozen=True)
class Lost:
    """An attempt that ended without a result: set aside under retries/ with this classification."""

    classification: str
    reason: str


class Executor(Protocol):
    name: str

    def capacity(self) -> int | None:
        """Attempts it can run at once now (None: only max_active_tasks limits)."""

    def launch(self, task: TaskSpec, attempt: int, task_dir: Path) -> ActiveAttempt:
        """Start one attempt whose results belong in `task_dir`."""

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        """An attempt a previous queue started ("active" or "placed" on disk): take it over, or say it is lost."""

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        """Task ids among `active` whose attempt is no longer running (may fill in `node` on the others)."""

    def settle(self, active: ActiveAttempt) -> Lost | None:
        """After an attempt stopped: bring its result into its task directory, or say it is lost."""

    def nodes(self) -> dict[str, NodeInfo]:
        """Every node an attempt has been seen on, by name."""

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        """Remove what a dead or finished attempt left (containers, volumes, overlays, port leases)."""

    def sweep(self, live: set[tuple[str, int]]) -> list[tuple[str, int]]:
        """Remove the leftovers of every attempt of the run not in `live` (task id, attempt); returns them."""

    def close(self, run_done: bool) -> None:
        """The queue stops; `run_done` when nothing of the run is left running (every task is final, or launches
        stopped for good): then per-run services may stop too."""


class LocalExecutor:
    """Runner processes on this host (today's behaviour)."""

    name = "local"

    def __init__(self, config: RunConfig, runner: Sequence[str]) -> None:
        check_host(config)  # before the first launch: this host can run the config's guests
        self.config, self.runner = config, list(runner)
        self.children: dict[str, Popen[bytes]] = {}
        self.host = NodeInfo(name=current_host(), host=current_host())

    def capacity(self) -> int | None:
        return None

    def launch(self, task: TaskSpec, attempt: int, task_dir: Path) -> ActiveAttempt:
        command = self.runner + runner_args(self.config, task, attempt, task_dir)
        child = spawn(command, self.config.run_dir / "logs" / f"{task.id}.log", attempt)
        self.children[task.id] = child
        return ActiveAttempt(task.id, attempt, child.pid, time.time(), False, task_dir, self.host.name)

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        task_dir = self.config.run_dir / "tasks" / view.task_id
        if view.state == "placed":
            raise QueueRefused(f"{task_dir}: attempt {view.attempt} was started by the ray executor; run the "
                               "queue with the config that started it")
        assert view.pid is not None
        started = view.lease.started_at if view.lease else time.time()
        return ActiveAttempt(view.task_id, view.attempt, view.pid, started, True, task_dir, self.host.name)

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        done = []
        for attempt in active:
            child = self.children.get(attempt.task_id)
            alive = child.poll() is None if child else runs_attempt(attempt.pid, attempt.result_dir)
            if not alive:
                self.children.pop(attempt.task_id, None)
                done.append(attempt.task_id)
        return done

    def settle(self, active: ActiveAttempt) -> Lost | None:
        return None  # the runner wrote its results in place

    def nodes(self) -> dict[str, NodeInfo]:
        return {self.host.name: self.host}

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        cleanup_attempt(attempt)

    def sweep(self, live: set[tuple[str, int]]) -> list[tuple[str, int]]:
        run_id = str(self.config.run_id)
        orphans = sorted(run_attempts_with_containers(run_id) - live)
        for task_id, attempt in orphans:
            cleanup_attempt(AttemptId(run_id=run_id, task_id=task_id, attempt=attempt))
        return orphans

    def close(self, run_done: bool) -> None:
        for child in self.children.values():  # reap exited children; live ones keep running
            with contextlib.suppress(Exception):
                child.poll()


def make_executor(config: RunConfig, runner: Sequence[str] | None) -> Executor:
    """The executor a config names; `runner` replaces the real run_task (tests use a stand-in)."""
    from hcu.osworld.queue.launch import RUN_TASK

    if config.executor == "ray":
        from hcu.osworld.queue.ray_executor import RayExecutor  # Ray only when a config asks for it

        return RayExecutor(config, runner)
    return LocalExecutor(config, runner or RUN_TASK)
