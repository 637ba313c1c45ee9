"""The guest's container image, pinned: resolution to an immutable reference, the flag and config key that name
it, and its record in a run's manifest."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import docker.errors
import orjson
import pytest

from hcu.osworld.guest.container_image import repository, resolve
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import GuestSpec
from hcu.osworld.queue.manifest import ManifestMismatch, docker_image_identity, record_start
from hcu.osworld.records.manifest import DockerImageIdentity
from hcu.osworld.run_config import load_config
from hcu.osworld.settings import GuestSettings
from tests.guest.conftest import QEMU_RUNNER_IMAGE


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
def test_the_manifest_pins_the_qemu_container_image_from_the_first_start_that_finds_it(
    test_desktop_image: str, qemu_guest_disk: Path, tmp_path: Path
) -> None:
    """A run may start before its first attempt pulls the image; from then on the image is pinned by id. Local
    tags stand in for a pull here (no registry is reachable)."""
    reference = f"hcu-test-pin-{uuid.uuid4().hex[:8]}:v1"
    config = load_config(write_config(tmp_path, {"guest_image": str(qemu_guest_disk),
                                                 "guest_docker_image": reference}))
    with contextlib.closing(docker_client()) as client:
        try:
            assert record_start(config).guest_docker_image == DockerImageIdentity(reference=reference,
                                                                                 error="ImageNotFound")
            client.images.get(test_desktop_image).tag(reference)  # "pulled" by the first attempt
            pinned = record_start(config).guest_docker_image
            assert pinned == DockerImageIdentity(reference=reference, id=client.images.get(test_desktop_image).id,
                                                 repo_digest=None)
            client.images.get(QEMU_RUNNER_IMAGE).tag(reference)  # the tag moved under the run
            with pytest.raises(ManifestMismatch, match="guest_docker_image changed"):
                record_start(config)
            stored = orjson.loads((config.run_dir / "manifest.json").read_bytes())
            assert stored["guest_docker_image"] == pinned.model_dump() and len(stored["starts"]) == 2
        finally:
            client.images.remove(reference)


def test_the_test_desktop_has_no_qemu_container_image(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, {"test_desktop": True}))
    assert docker_image_identity(config) is None


def write_config(tmp_path: Path, guest: dict[str, object]) -> Path:
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "codex").write_bytes(b"cli")
    body = {"agent": "codex", "tasks": [{"id": "t1", "task_domain": "os"}], "artifact_dir": "artifacts",
            "results_dir": "runs", "gateway": "http://127.0.0.1:9", **guest}
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(body))
    return path
