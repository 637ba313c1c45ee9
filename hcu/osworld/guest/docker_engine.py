"""The Docker engine client hcu uses: DOCKER_HOST or the default socket, every API call bounded."""

from __future__ import annotations

import docker

DOCKER_API_TIMEOUT_SEC = 60
DOCKER_PULL_TIMEOUT_SEC = 1800


def docker_client(timeout_sec: float = DOCKER_API_TIMEOUT_SEC) -> docker.DockerClient:
    """A client whose every API call gives up after `timeout_sec` (raised as a requests timeout)."""
    return docker.from_env(timeout=int(timeout_sec))
