"""The QEMU stand-in's runner as a bare container: what it needs (/System.qcow2, /dev/kvm, memory, NET_ADMIN),
how it fails as the official image does (exit 88, exit 17, the user-mode fallback) and what hcu reads of that, and
which accelerator it boots with. No guest boots to the end here; tests/guest/test_qemu_guest.py boots them."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker.models.containers import Container

from hcu.osworld.errors import ConfigurationError, GuestError, GuestMemoryError
from hcu.osworld.guest.console import ContainerWatch
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import kvm_problem
from hcu.osworld.records.identity import AttemptId
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
    ("image", "options", "status", "message"),
    [
        (QEMU_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"]}, 1,
         "no guest disk: mount the guest qcow2 at /System.qcow2 (-v IMAGE:/System.qcow2:ro)"),
        (KVM_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"], "with_disk": True}, 88,
         "KVM acceleration is not available (/dev/kvm is missing): add --device /dev/kvm on a host with "
         "virtualisation enabled (KVM=N boots with TCG, very slowly)"),
        (QEMU_RUNNER_IMAGE, {"cap_add": ["NET_ADMIN"], "with_disk": True, "environment": {"RAM_SIZE": "4 GB"}}, 1,
         "RAM_SIZE=4 GB: expected a size with its unit (4G, 8192M)"),
    ],
    ids=["no-disk", "no-kvm", "bad-ram-size"],
)
def test_the_runner_refuses_what_it_cannot_boot_with_one_line(
    qemu_guest_disk: Path, image: str, options: dict[str, Any], status: int, message: str
) -> None:
    if options.pop("with_disk", False):
        options["volumes"] = disk(qemu_guest_disk)
    with runner(image, **options) as container:
        code, log = exit_and_log(container)
    assert code == status and log.strip().splitlines()[-1] == f"hcu-qemu: error: {message}"


@pytest.mark.docker
def test_the_runner_exits_17_when_ram_size_does_not_fit_the_available_memory(qemu_guest_disk: Path) -> None:
    """As the official image: RAM_SIZE plus 500 MB against the host's MemAvailable; hcu reads the exit."""
    with runner(QEMU_RUNNER_IMAGE, cap_add=["NET_ADMIN"], volumes=disk(qemu_guest_disk),
                environment={"RAM_SIZE": "1000G"}) as container:
        code, log = exit_and_log(container)
        with pytest.raises(GuestMemoryError, match=r"the image exited 17, .*RAM_SIZE=1000G is too high for the"):
            ContainerWatch(container, "g").check()
    assert code == 17 and log.strip().endswith("of memory available (it needs RAM_SIZE plus 500 MB)")


@pytest.mark.docker
def test_without_kvm_the_runner_exits_88_and_hcu_names_kvm(qemu_guest_disk: Path) -> None:
    with runner(KVM_RUNNER_IMAGE, cap_add=["NET_ADMIN"], volumes=disk(qemu_guest_disk)) as container:
        assert container.wait(timeout=120)["StatusCode"] == 88
        with pytest.raises(ConfigurationError, match=r"^KVM: guest g: the image exited 88, .*/dev/kvm is missing"):
            ContainerWatch(container, "g").check()


@pytest.mark.docker
def test_without_nat_the_runner_falls_back_to_user_mode_networking_and_hcu_sees_it(qemu_guest_disk: Path) -> None:
    """No NET_ADMIN: the NAT setup fails, and the runner boots on user-mode networking (port 5000 never answers),
    saying so as the official image does; hcu's watch of the log names it while the container runs on."""
    with runner(QEMU_RUNNER_IMAGE, volumes=disk(qemu_guest_disk), environment={"RAM_SIZE": "1G"}) as container:
        log = wait_for_log(container, "hcu-qemu: booting")
        assert "hcu-qemu: error: cannot create the guest's bridge: add --cap-add NET_ADMIN" in log
        watch = ContainerWatch(container, "g")
        with pytest.raises(GuestError, match=r"fell back to user-mode networking .*: hcu-qemu: warning: falling "
                                             r"back to user-mode networking \(slow\)"):
            watch.check()
        container.reload()
        assert container.status == "running"


@pytest.mark.docker
@pytest.mark.kvm
def test_the_runner_boots_with_kvm_unless_asked_for_tcg(qemu_guest_disk: Path) -> None:
    """With KVM only where the official image would have it (hcu's host check says the same of this host);
    elsewhere it exits 88 as the official image does."""
    common = {"devices": ["/dev/kvm:/dev/kvm:rwm"], "cap_add": ["NET_ADMIN"], "volumes": disk(qemu_guest_disk),
              "environment": {"RAM_SIZE": "1536M", "CPU_CORES": "1", "DISK_SIZE": "2G"}}
    problem = kvm_problem()
    with runner(KVM_RUNNER_IMAGE, **common) as container:
        if problem is None:
            log = wait_for_log(container, "hcu-qemu: booting")
            assert "accel=kvm cpu=qemu64 cores=1 ram=1536M data disk=2G" in log and "TCG" not in log
        else:
            code, log = exit_and_log(container)
            assert code == 88 and "KVM acceleration is not available" in log, log
    with runner(QEMU_RUNNER_IMAGE, **common) as container:
        log = wait_for_log(container, "hcu-qemu: booting")
        assert "KVM=N: booting with TCG" in log and "accel=tcg" in log


@pytest.mark.docker
@pytest.mark.kvm
def test_the_uefi_runner_starts_debians_ovmf(make_qcow2) -> None:
    """`:uefi-tcg` boots with Debian's OVMF (the official Ubuntu qcow2 boots by UEFI only): on an empty disk the
    firmware comes up and reports it found nothing to boot, on the serial console that is the container's log."""
    empty = make_qcow2("empty.qcow2", "1G")
    with runner(f"{QEMU_RUNNER_REPO}:uefi-tcg", devices=["/dev/kvm:/dev/kvm:rwm"], cap_add=["NET_ADMIN"],
                volumes=disk(empty), environment={"RAM_SIZE": "1G", "DISK_SIZE": "1G"}) as container:
        log = wait_for_log(container, "BdsDxe", timeout_sec=300)
        assert "firmware=uefi" in log
