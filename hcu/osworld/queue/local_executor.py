"""The local executor (the default): runner processes on this host's Docker engine, in their own sessions, so a
stopped queue leaves them running and the next one adopts them by the pid in their lease."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from subprocess import Popen

from hcu.osworld.guest.kinds import check_host
from hcu.osworld.queue.containers import cleanup_attempt, run_attempts_with_containers
from hcu.osworld.queue.executor import Lost, QueueRefused
from hcu.osworld.queue.launch import runner_args, spawn
from hcu.osworld.queue.state import TaskView, runs_attempt
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport, fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import current_host
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.run_config import RunConfig, TaskSpec


class LocalExecutor:
    """Runner processes on this host."""

    name = "local"

    def __init__(self, config: RunConfig, runner: Sequence[str]) -> None:
        check_host(config)  # before the first launch: this host can run the config's guests
        self.config, self.runner = config, list(runner)
        self.children: dict[str, Popen[bytes]] = {}
        self.host = NodeInfo(name=current_host(), host=current_host())

    def capacity(self) -> int | None:
        return None

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        command = self.runner + runner_args(self.config, task, attempt.attempt, task_dir, repeat=attempt.repeat)
        child = spawn(command, self.config.run_dir / "logs" / f"{attempt.task_key}.log", attempt.attempt)
        self.children[attempt.task_key] = child
        return ActiveAttempt(task.id, attempt.attempt, child.pid, time.time(), False, task_dir, self.host.name,
                             attempt.repeat)

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        task_dir = self.config.run_dir / "tasks" / view.key
        if view.state == "placed":
            raise QueueRefused(f"{task_dir}: attempt {view.attempt} was started by the ray executor; run the "
                               "queue with the config that started it")
        assert view.pid is not None
        started = view.lease.started_at if view.lease else time.time()
        return ActiveAttempt(view.task_id, view.attempt, view.pid, started, True, task_dir, self.host.name,
                             view.repeat)

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        done = []
        for attempt in active:
            child = self.children.get(attempt.key)
            alive = child.poll() is None if child else runs_attempt(attempt.pid, attempt.result_dir)
            if not alive:
                self.children.pop(attempt.key, None)
                done.append(attempt.key)
        return done

    def settle(self, active: ActiveAttempt) -> Lost | None:
        return None  # the runner wrote its results in place

    def nodes(self) -> dict[str, NodeInfo]:
        return {self.host.name: self.host}

    def gateway_reports(self) -> list[GatewayReport] | None:
        """The run's gateway, asked from its host (this one) about the run's scopes."""
        report = fetch_report(str(self.config.gateway), f"{self.config.run_id}.")
        return None if report is None else [report]

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        cleanup_attempt(attempt)

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        orphans = sorted(run_attempts_with_containers(str(self.config.run_id)) - live, key=str)
        for attempt in orphans:
            cleanup_attempt(attempt)
        return orphans

    def close(self, run_done: bool) -> None:
        for child in self.children.values():  # reap exited children; live ones keep running
            with contextlib.suppress(Exception):
                child.poll()
