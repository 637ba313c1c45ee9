"""The queue's view of Docker: which attempts of a run still own containers, and removing an attempt's."""

from __future__ import annotations

import contextlib

from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.records.identity import (
    LABEL_ATTEMPT,
    LABEL_MANAGED,
    LABEL_REPEAT,
    LABEL_RUN_ID,
    LABEL_TASK_ID,
    AttemptId,
)


def run_attempts_with_containers(run_id: str) -> set[AttemptId]:
    """Every attempt that owns a container, running or not, labelled with this run."""
    found = set()
    filters = {"label": [f"{LABEL_MANAGED}=1", f"{LABEL_RUN_ID}={run_id}"]}
    with engine_calls(f"the containers of run {run_id}"), contextlib.closing(docker_client()) as client:
        for container in client.containers.list(all=True, filters=filters):
            labels = container.labels
            attempt, repeat = labels.get(LABEL_ATTEMPT, ""), labels.get(LABEL_REPEAT, "1")
            if labels.get(LABEL_TASK_ID) and attempt.isdigit() and repeat.isdigit() and "0" not in (attempt, repeat):
                found.add(AttemptId(run_id=run_id, task_id=labels[LABEL_TASK_ID], attempt=int(attempt),
                                    repeat=int(repeat)))
    return found


def cleanup_attempt(attempt: AttemptId) -> None:
    """Remove what a dead attempt left (containers, volumes, overlays, port leases), found by its labels."""
    cleanup(run_id=attempt.run_id, task_id=attempt.task_id, attempt=attempt.attempt, repeat=attempt.repeat)
