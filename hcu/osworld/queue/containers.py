"""The queue's view of Docker: which attempts of a run still own containers, and removing an attempt's."""

from __future__ import annotations

import docker

from hcu.osworld.attempt.identity import LABEL_ATTEMPT, LABEL_MANAGED, LABEL_RUN_ID, LABEL_TASK_ID, AttemptId

DOCKER_TIMEOUT_SEC = 60


def _client() -> docker.DockerClient:
    return docker.from_env(timeout=DOCKER_TIMEOUT_SEC)


def run_attempts_with_containers(run_id: str) -> set[tuple[str, int]]:
    """(task_id, attempt) of every container, running or not, labelled with this run."""
    found = set()
    filters = {"label": [f"{LABEL_MANAGED}=1", f"{LABEL_RUN_ID}={run_id}"]}
    for container in _client().containers.list(all=True, filters=filters):
        labels = container.labels
        if labels.get(LABEL_TASK_ID) and labels.get(LABEL_ATTEMPT, "").isdigit():
            found.add((labels[LABEL_TASK_ID], int(labels[LABEL_ATTEMPT])))
    return found


def cleanup_attempt(attempt: AttemptId) -> None:
    """Remove what a dead attempt left (containers, volumes, overlays, port leases), found by its labels."""
    from hcu.osworld.guest.lifecycle import cleanup  # the guest stack loads only when there is something to remove

    cleanup(run_id=attempt.run_id, task_id=attempt.task_id, attempt=attempt.attempt)
