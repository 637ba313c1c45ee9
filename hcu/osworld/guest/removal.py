"""Removal by labels: every container (with its volumes), volume, overlay, port lease and memory reservation hcu
made, found after a crash as well as after a clean run (everything is labelled or registered before it exists)."""

from __future__ import annotations

import contextlib

import docker.errors
from pydantic import BaseModel

from hcu.osworld.guest import control as controls
from hcu.osworld.guest import memory
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.records.identity import LABEL_ATTEMPT, LABEL_MANAGED, LABEL_REPEAT, LABEL_RUN_ID, LABEL_TASK_ID


class CleanupReport(BaseModel):
    containers: list[str] = []
    volumes: list[str] = []
    overlays: list[str] = []
    control_folders: list[str] = []
    port_leases: list[str] = []
    memory_reservations: list[str] = []

    def lines(self) -> list[str]:
        return [f"removed {kind[:-1]} {item}" for kind, items in self.model_dump().items() for item in items]


def selector(*, run_id: str | None, task_id: str | None, attempt: int | None,
             repeat: int | None = None) -> dict[str, str]:
    labels = {LABEL_MANAGED: "1"}
    for key, value in ((LABEL_RUN_ID, run_id), (LABEL_TASK_ID, task_id), (LABEL_REPEAT, repeat),
                       (LABEL_ATTEMPT, attempt)):
        if value is not None:
            labels[key] = str(value)
    return labels


def cleanup(
    *, run_id: str | None = None, task_id: str | None = None, attempt: int | None = None, repeat: int | None = None
) -> CleanupReport:
    """Remove every container, volume, overlay, port lease and memory reservation carrying `hcu.managed=1` and
    the given labels (no arguments: everything hcu manages on this host). An attempt is found by its repeat and its
    attempt number together: attempt 1 of repeat 1 and attempt 1 of repeat 2 are different attempts."""
    labels = selector(run_id=run_id, task_id=task_id, attempt=attempt, repeat=repeat)
    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    report = CleanupReport()
    with engine_calls("cleanup"), contextlib.closing(docker_client()) as client:
        for container in client.containers.list(all=True, filters=filters):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(v=True, force=True)
                report.containers.append(container.name)
        for volume in client.volumes.list(filters=filters):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
                report.volumes.append(volume.name)
    report.overlays = [str(path) for path in overlays.remove_matching(labels)]
    report.control_folders = [str(path) for path in controls.remove_matching(labels)]
    report.port_leases = port_leases.release_matching(labels)
    report.memory_reservations = memory.release_matching(labels)
    return report
