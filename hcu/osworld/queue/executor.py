"""What an executor is: where attempts run. The panel queue (panel.py) decides what runs and when; an executor
starts attempts, tells which have stopped, brings their results into the run directory and removes what they
leave. The executors themselves live apart (local_executor.py, ray_executor.py) and are chosen by
executors.py; this module imports none of them, so each can import it.

Nothing else in hcu knows which executor ran an attempt: every executor leaves the same run directory layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hcu.osworld.errors import FailureClass, HcuOSWorldError
from hcu.osworld.queue.state import TaskView
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.run_config import TaskSpec


class QueueRefused(HcuOSWorldError):
    """The queue will not run on this directory; the message says why in one line."""


@dataclass(frozen=True)
class Lost:
    """An attempt that ended without a result: set aside under retries/ with this classification."""

    classification: FailureClass
    reason: str


class Executor(Protocol):
    name: str

    def capacity(self) -> int | None:
        """Attempts it can run at once now (None: only max_active_tasks limits)."""

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        """Start one attempt (of one repeat of `task`) whose results belong in `task_dir`."""

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        """An attempt a previous queue started ("active" or "placed" on disk): take it over, or say it is lost."""

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        """Keys (`ActiveAttempt.key`) among `active` whose attempt is no longer running (may fill in `node` on
        the others)."""

    def settle(self, active: ActiveAttempt) -> Lost | None:
        """After an attempt stopped: bring its result into its task directory, or say it is lost."""

    def nodes(self) -> dict[str, NodeInfo]:
        """Every node an attempt has been seen on, by name."""

    def gateway_reports(self) -> list[GatewayReport] | None:
        """What the run's gateways report on its scopes' rate-limit waits and their upstreams' limits, for the
        admission under "max_active_tasks": "auto" (None: none could be read now); asked once a poll at most."""

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        """Remove what a dead or finished attempt left (containers, volumes, overlays, port leases)."""

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        """Remove the leftovers of every attempt of the run not in `live`; returns them."""

    def close(self, run_done: bool) -> None:
        """The queue stops; `run_done` when nothing of the run is left running (every task is final, or launches
        stopped for good): then per-run services may stop too."""
