"""The QEMU stand-in's runner as a bare container: what it needs (/System.qcow2, /dev/kvm, NET_ADMIN) and which
accelerator it boots with. No guest boots to the end here; tests/guest/test_qemu_guest.py boots them."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker.models.containers import Container

from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.guest.docker_engine import docker_client
from tests.guest.conftest import QEMU_RUNNER_IMAGE, QEMU_RUNNER_REPO

KVM_RUNNER_IMAGE = f"{QEMU_RUNNER_REPO}:latest"


@contextlib.contextmanager
def runner(image: str, **options: Any) -> Iterator[Container]:
    """A labelled runner container, removed with its anonymous /storage volume."""
    labels = AttemptId(run_id=f"test-runner-{uuid.uuid4().hex[:8]}", task_id="runner", attempt=1).labels()
    with contextlib.closing(docker_client()) as client:
        container = client.containers.run(image, detach=True, labels=labels, **options)
        try:
            yield container
        finally:
            container.remove(v=True, force=True)


def exit_and_log(container: Container) -> tuple[int, str]:
    status = container.wait(timeout=120)["StatusCode"]
    return status, container.logs().decode(errors="replace")


def wait_for_log(container: Container, text: str, timeout_sec: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        log = container.logs().decode(errors="replace")
        if text in log:
            return log
        container.reload()
        assert container.status == "running", log[-2000:]
        time.sleep(0.2)
    raise AssertionError(f"the runner never logged {text!r}")


def disk(base: Path) -> dict[str, dict[str, str]]:
    return {str(base): {"bind": "/System.qcow2", "mode": "ro"}}


@pytest.mark.docker
@pytest.mark.parametrize(
    ("image", "options", "message"),
    [
        (QEMU_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"]},
         "no guest disk: mount the guest qcow2 at /System.qcow2 (-v IMAGE:/System.qcow2:ro)"),
        (KVM_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"], "with_disk": True},
         "KVM acceleration is not available: add --device /dev/kvm (KVM=N boots with TCG, very slowly)"),
        (QEMU_RUNNER_IMAGE, {"with_disk": True},
         "cannot create the guest's bridge: add --cap-add NET_ADMIN"),
        (QEMU_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"], "with_disk": True, "environment": {"RAM_SIZE": "4 GB"}},
         "RAM_SIZE=4 GB: expected a size with its unit (4G, 8192M)"),
    ],
    ids=["no-disk", "no-kvm", "no-net-admin", "bad-ram-size"],
)
def test_the_runner_refuses_what_it_cannot_boot_with_one_line(
    qemu_guest_disk: Path, image: str, options: dict[str, Any], message: str
) -> None:
    if options.pop("with_disk", False):
        options["volumes"] = disk(qemu_guest_disk)
    with runner(image, **options) as container:
        status, log = exit_and_log(container)
    assert status == 1 and log.strip().splitlines()[-1] == f"hcu-qemu: error: {message}"


@pytest.mark.docker
@pytest.mark.kvm
def test_the_runner_boots_with_kvm_unless_asked_for_tcg(qemu_guest_disk: Path) -> None:
    common = {"devices": ["/dev/kvm:/dev/kvm:rwm"], "cap_add": ["NET_ADMIN"], "volumes": disk(qemu_guest_disk),
              "environment": {"RAM_SIZE": "1536M", "CPU_CORES": "1", "DISK_SIZE": "2G"}}
    with runner(KVM_RUNNER_IMAGE, **common) as container:
        log = wait_for_log(container, "hcu-qemu: booting")
        assert "accel=kvm cpu=qemu64 cores=1 ram=1536M data disk=2G" in log and "TCG" not in log
    with runner(QEMU_RUNNER_IMAGE, **common) as container:
        log = wait_for_log(container, "hcu-qemu: booting")
        assert "KVM=N: booting with TCG" in log and "accel=tcg" in log
