"""The guest's container image, pinned: resolution to an immutable reference, the flag and config key that name
it, and its record in a run's manifest."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import docker.errors
import pytest

from hcu.osworld.guest.container_image import repository, resolve
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import GuestSpec
from hcu.osworld.queue.config import RunConfig
from hcu.osworld.queue.manifest import guest_identity
from hcu.osworld.settings import GuestSettings


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("happysixd/osworld-docker", "happysixd/osworld-docker"),
        ("happysixd/osworld-docker:latest", "happysixd/osworld-docker"),
        ("happysixd/osworld-docker@sha256:" + "0" * 64, "happysixd/osworld-docker"),
        ("registry.local:5000/osworld-docker:v2", "registry.local:5000/osworld-docker"),
        ("hcu-qemu-guest:tcg", "hcu-qemu-guest"),
    ],
)
def test_repository_of_a_reference(reference: str, expected: str) -> None:
    assert repository(reference) == expected


def test_the_flag_and_key_name_the_qemu_container_image(tmp_path: Path) -> None:
    default = GuestSettings(guest_image=tmp_path / "g.qcow2", volume_size=64, client_password="p")
    assert GuestSpec.for_settings(default).docker_image == "happysixd/osworld-docker"
    chosen = default.model_copy(update={"guest_docker_image": "hcu-qemu-guest:latest"})
    spec = GuestSpec.for_settings(chosen)
    assert (spec.kind, spec.container_image) == ("qemu", "hcu-qemu-guest:latest")


@pytest.mark.docker
def test_a_local_image_is_pinned_by_its_id(test_desktop_image: str) -> None:
    with contextlib.closing(docker_client()) as client:
        pinned = resolve(client, test_desktop_image, pull=False)
        assert pinned.id == client.images.get(test_desktop_image).id
        assert pinned.repo_digest is None and pinned.pinned == pinned.id
        with pytest.raises(docker.errors.ImageNotFound):
            resolve(client, "hcu-no-such-image:never", pull=False)


@pytest.mark.docker
def test_the_manifest_records_the_qemu_container_image(
    test_desktop_image: str, make_qcow2: Callable[[str, str], Path], tmp_path: Path
) -> None:
    """Any local image stands in for the QEMU one here: the manifest only resolves and records it."""
    image = make_qcow2("guest.qcow2", "1G")
    config = RunConfig.model_validate({
        "agent": "codex", "tasks": ["t"], "guest_image": str(image), "guest_docker_image": test_desktop_image,
    })
    identity = guest_identity(config, tmp_path / "sha-cache.json")
    assert identity["path"] == str(image) and identity["sha256"]
    with contextlib.closing(docker_client()) as client:
        assert identity["docker_image"] == {
            "reference": test_desktop_image, "id": client.images.get(test_desktop_image).id, "repo_digest": None,
        }
