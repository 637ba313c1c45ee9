"""The container image a guest runs, resolved once to an immutable identity.

A reference such as `happysixd/osworld-docker` (a tag that can move) is looked up in the local engine, pulled
when absent, and from then on named by its registry digest (`name@sha256:...`) or, for a locally built image,
by its image id: every container of an attempt, and the run's manifest, then name exactly one image.
"""

from __future__ import annotations

import contextlib

import docker
import docker.errors
from pydantic import BaseModel

from hcu.osworld.guest.docker_engine import DOCKER_PULL_TIMEOUT_SEC, docker_client


class ContainerImage(BaseModel):
    reference: str
    """As configured (guest_docker_image, or the test desktop's image)."""
    id: str
    """The local image id (sha256:...)."""
    repo_digest: str | None = None
    """`name@sha256:...` when the image came from a registry; None for a locally built image."""

    @property
    def pinned(self) -> str:
        """The reference containers are created from: the digest, else the image id."""
        return self.repo_digest or self.id


def repository(reference: str) -> str:
    """`registry:5000/name:tag@sha256:...` -> `registry:5000/name` (a port is not a tag)."""
    name = reference.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def resolve(client: docker.DockerClient, reference: str, *, pull: bool) -> ContainerImage:
    """The local image `reference` names; with `pull`, pulled first when absent (ImageNotFound otherwise)."""
    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        if not pull:
            raise
        with contextlib.closing(docker_client(DOCKER_PULL_TIMEOUT_SEC)) as puller:
            image = puller.images.pull(reference)
    digests = image.attrs.get("RepoDigests") or []
    wanted = repository(reference)
    matching = [d for d in digests if repository(d) in (wanted, f"docker.io/{wanted}")]
    return ContainerImage(reference=reference, id=image.id, repo_digest=(matching or [None])[0])
