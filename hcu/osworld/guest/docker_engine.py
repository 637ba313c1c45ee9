"""The Docker engine client hcu uses: DOCKER_HOST or the default socket, every API call bounded; and where the
engine's errors become hcu's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import docker
import docker.errors
import requests

from hcu.osworld.errors import DockerEngineError

DOCKER_API_TIMEOUT_SEC = 60
DOCKER_PULL_TIMEOUT_SEC = 1800


def docker_client(timeout_sec: float = DOCKER_API_TIMEOUT_SEC) -> docker.DockerClient:
    """A client whose every API call gives up after `timeout_sec` (raised as a requests timeout)."""
    return docker.from_env(timeout=int(timeout_sec))


@contextlib.contextmanager
def engine_calls(what: str) -> Iterator[None]:
    """Docker's errors, and the requests errors its transport raises (a timeout, a refused socket), as a
    DockerEngineError naming `what`: where the engine's failures enter hcu's exception tree. Inside a readiness
    step the step translates them (readiness.Readiness)."""
    try:
        yield
    except (docker.errors.DockerException, requests.RequestException) as exc:
        detail = " ".join(str(exc).split())[:300]
        raise DockerEngineError(f"{what}: the Docker engine failed ({type(exc).__name__}: {detail})") from exc
