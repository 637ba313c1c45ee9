"""Guest test fixtures: the test desktop image, the QEMU stand-in, unique attempt ids, running guests, fake qcow2
files."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker.errors
import pytest

from hcu import REPO_ROOT
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import Guest, GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest_state.snapshots import SnapshotCache, SnapshotEntry
from hcu.osworld.records.identity import AttemptId
from tests.session import unique_run_id

TEST_DESKTOP_IMAGE = os.environ.get("HCU_TEST_DESKTOP_IMAGE", "hcu-test-desktop:latest")
"""The image under test (another tag while a change to it is being built)."""
QEMU_RUNNER_REPO = os.environ.get("HCU_QEMU_GUEST_IMAGE", "hcu-qemu-guest")
"""The QEMU stand-in's runner under test (the Makefile's QEMU_GUEST_IMAGE; another name while a change to it is
being built)."""
QEMU_RUNNER_IMAGE = f"{QEMU_RUNNER_REPO}:tcg"
"""The QEMU stand-in asked to boot with TCG: this CI machine's /dev/kvm is PVM, which runs only PVM-enabled kernels
natively (scripts/qemu-guest/README.md); `:latest` is the same image booting with KVM."""
QEMU_GUEST_DISK = (REPO_ROOT / "build" / "qemu-guest" / "test-desktop.qcow2").resolve()
"""Resolved, as hcu resolves a guest image (build/ may be a link, e.g. in a second worktree)."""


@pytest.fixture(scope="session")
def test_desktop_image() -> str:
    with contextlib.closing(docker_client()) as client:
        try:
            client.images.get(TEST_DESKTOP_IMAGE)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{TEST_DESKTOP_IMAGE} is missing: build it with `make test-desktop`", pytrace=False)
    return TEST_DESKTOP_IMAGE


@pytest.fixture(scope="session")
def qemu_guest_disk() -> Path:
    """The stand-in's bootable qcow2, with its runner image present (both from `make qemu-guest`)."""
    with contextlib.closing(docker_client()) as client:
        try:
            client.images.get(QEMU_RUNNER_IMAGE)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{QEMU_RUNNER_IMAGE} is missing: build it with `make qemu-guest`", pytrace=False)
    if not QEMU_GUEST_DISK.is_file():
        pytest.fail(f"{QEMU_GUEST_DISK} is missing: build it with `make qemu-guest`", pytrace=False)
    return QEMU_GUEST_DISK


QEMU_GUEST = {"docker_image": QEMU_RUNNER_IMAGE, "volume_size_gb": 64, "ram_size": "2G"}
"""The QEMU stand-in's configuration in every test (run_task's cores): one snapshot serves them all."""
SNAPSHOT_BUILD_SEC = 1200.0
"""The warm-up boot under TCG on a busy 2-core machine, with the save."""


def qemu_spec(disk: Path) -> GuestSpec:
    return GuestSpec(kind="qemu", image=str(disk), **QEMU_GUEST)


@pytest.fixture(scope="session")
def qemu_snapshot(qemu_guest_disk: Path) -> SnapshotEntry:
    """This session's snapshot of the QEMU stand-in, in the session's state dir, built at its first use: its
    warm-up is the session's one boot of the stand-in from nothing (the cold path, readiness and growth included);
    every other QEMU guest of the session, run_task's and the canary's among them, restores it."""
    lookup = SnapshotCache().ensure(qemu_spec(qemu_guest_disk), AttemptId(
        run_id=unique_run_id("snapshot"), task_id="session", attempt=1), deadline=time.monotonic() + SNAPSHOT_BUILD_SEC)
    if lookup.entry is None:
        pytest.fail(f"the QEMU stand-in's snapshot could not be made: {lookup.reason}", pytrace=False)
    return lookup.entry


@pytest.fixture
def new_attempt() -> Iterator[Callable[..., AttemptId]]:
    """Makes attempt ids with run ids unique to this test; removes whatever they left at teardown."""
    made: list[AttemptId] = []

    def make(task_id: str = "task-1", attempt: int = 1) -> AttemptId:
        made.append(AttemptId(run_id=f"test-{uuid.uuid4().hex[:10]}", task_id=task_id, attempt=attempt))
        return made[-1]

    yield make
    for attempt in made:
        cleanup(run_id=attempt.run_id)


@pytest.fixture
def make_qcow2(tmp_path: Path) -> Callable[[str, str], Path]:
    """Makes an empty qcow2 file of a given virtual size: the stand-in for the official guest image."""

    def make(name: str, size: str) -> Path:
        path = tmp_path / name
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), size], check=True, timeout=30)
        return path

    return make


@pytest.fixture(scope="module")
def desktop_guest(test_desktop_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    """One running test desktop shared by a module's tests (each test leaves it usable)."""
    attempt = AttemptId(run_id=f"test-{uuid.uuid4().hex[:10]}", task_id="shared", attempt=1)
    spec = GuestSpec(kind="test-desktop", image=test_desktop_image)
    guest = start_guest(spec, attempt, work_dir=tmp_path_factory.mktemp("guest"), boot_timeout_sec=120)
    yield guest
    remove_guest(guest)
    cleanup(run_id=attempt.run_id)
