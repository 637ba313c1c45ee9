"""Memory admission: a guest starts only when its need fits the host's memory, host-wide across runners, the wait
shown in the attempt's progress. The host's memory is a meminfo of the test's own ($HCU_HOST_PROC); the ledger
is the real one, in a state directory of the test's own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from hcu.osworld.errors import BootTimeout, ConfigurationError
from hcu.osworld.guest import memory
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import HOST_PROC_ENV, HostMemory, size_bytes
from hcu.osworld.guest.lifecycle import BootRecord, GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.memory import Reservation, shortfall
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest.state_dir import STATE_DIR_ENV, locked_table
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.interrupts import deadline
from hcu.record_io import write_json
from tests.guest.host_files import host_proc
from tests.guest.waiting import wait_for
from tests.session import unique_run_id

GIB = 1 << 30


def need_bytes(kind: str, ram_size: str) -> int:
    spec = GuestSpec(kind=kind, image="guest.qcow2" if kind == "qemu" else "hcu-test-desktop", ram_size=ram_size)
    return spec.guest_kind.memory_need(ram_size)[0]


DESKTOP = need_bytes("test-desktop", "4G")


def reservation(owner: str, size: int, *, starting: bool) -> Reservation:
    return Reservation(owner=owner, pid=os.getpid(), labels={"hcu.run_id": "r"}, bytes=size, starting=starting)


def test_a_guest_needs_its_ram_size_plus_the_image_overhead_or_the_test_desktop_footprint() -> None:
    assert need_bytes("qemu", "4G") == 4 * GIB + size_bytes("512M")
    assert need_bytes("test-desktop", "64G") == DESKTOP == GIB, "the test desktop ignores RAM_SIZE"


def test_starting_guests_count_against_available_memory_and_all_guests_against_the_total() -> None:
    host = HostMemory(total=8 * GIB, available=6 * GIB)
    assert shortfall(host, 4 * GIB, []) is None
    starting = shortfall(host, 4 * GIB, [reservation("a", 2 * GIB, starting=True)])
    assert starting == "needs 4.0 GiB and 0.5 GiB to spare; 6.0 GiB available, 2.0 GiB of it reserved by guests " \
                       "still starting"
    # a running guest's memory is in the available figure already: it counts only against the total
    assert shortfall(host, 4 * GIB, [reservation("a", 2 * GIB, starting=False)]) is None
    running = [reservation(owner, 2 * GIB, starting=False) for owner in ("a", "b")]
    full = shortfall(host, 4 * GIB, running)
    assert full == "needs 4.0 GiB; 2 guests hold 4.0 GiB of the host's 8.0 GiB (0.5 GiB kept free)"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A host of 4 GiB with 3 GiB available, and a state directory (the ledger) of this test's own."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc", total_kib=4 << 20, available_kib=3 << 20)))
    yield tmp_path


def ledger() -> dict[str, Reservation]:
    with locked_table(memory.LEDGER, Reservation) as table:
        return dict(table)


@pytest.mark.docker
def test_a_guest_waits_until_another_releases_its_memory(host: Path) -> None:
    notes: list[str] = []
    with contextlib.closing(docker_client()) as client:
        assert memory.admit(client, 2 * GIB, "first", {"hcu.run_id": "r"}, "x", notes.append) == \
            "needs 2.0 GiB; 3.0 GiB available"

        def first_leaves(note: str) -> None:  # the first guest is removed while the second waits
            notes.append(note)
            memory.release("first")

        detail = memory.admit(client, 2 * GIB, "second", {"hcu.run_id": "r"}, "x", first_leaves)
    assert notes == ["waiting for memory: needs 2.0 GiB and 0.5 GiB to spare; 3.0 GiB available, 2.0 GiB of it "
                     "reserved by guests still starting"]
    assert detail.startswith("needs 2.0 GiB; 3.0 GiB available; waited ") and detail.endswith(" s for memory")
    assert list(ledger()) == ["second"] and ledger()["second"].starting
    memory.mark_running("second")
    assert not ledger()["second"].starting
    assert memory.release_matching({"hcu.run_id": "r"}) == ["second"] and ledger() == {}


@pytest.mark.docker
def test_a_guest_larger_than_the_host_is_a_configuration_error(host: Path) -> None:
    with contextlib.closing(docker_client()) as client, pytest.raises(ConfigurationError) as refused:
        memory.admit(client, need_bytes("qemu", "8G"), "big", {}, "ram_size 8G", lambda note: None)
    assert str(refused.value) == ("ram_size 8G: the guest needs 8.5 GiB and 0.5 GiB to spare, more than this "
                                  "host's 4.0 GiB of memory")
    assert ledger() == {}


@pytest.mark.docker
def test_the_reservation_of_a_runner_that_died_is_dropped(host: Path) -> None:
    """A runner killed after its reservation and before its container: its memory is not held forever."""
    script = ("import sys; from hcu.osworld.guest import memory; from hcu.osworld.guest.docker_engine import "
              "docker_client; memory.admit(docker_client(), 2 << 30, 'hcu-dead-runner-guest', {}, 'x', print)")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env=dict(os.environ))
    assert ledger()["hcu-dead-runner-guest"].starting
    with contextlib.closing(docker_client()) as client:
        memory.admit(client, 2 * GIB, "alive", {}, "x", pytest.fail)  # would wait (and fail) on a stale hold
    assert list(ledger()) == ["alive"]


def hold(size: int) -> None:
    with contextlib.closing(docker_client()) as client:
        memory.admit(client, size, "holder", {}, "x", pytest.fail)


@pytest.mark.docker
def test_a_phase_deadline_ends_the_wait(host: Path, test_desktop_image: str) -> None:
    """start_guest waiting for memory when the boot phase's deadline passes: the wait ends, nothing is left
    reserved or created, and the runner's own progress record is back."""
    progress = host / "result" / "progress.json"
    write_json(progress, {"phase": "boot", "since": 1.0})
    hold(2 * GIB)
    attempt = AttemptId(run_id=unique_run_id("memwait"), task_id="t", attempt=1)
    boot = BootRecord()
    with pytest.raises(BootTimeout), deadline(3.0, lambda: BootTimeout("phase boot overran")):
        start_guest(GuestSpec(kind="test-desktop", image=test_desktop_image), attempt,
                    work_dir=host / "result" / ".guest", boot=boot)
    assert [(s.name, s.ok) for s in boot.readiness] == [("image checked", True), ("memory admitted", False)]
    assert "BootTimeout: phase boot overran" in (boot.readiness[-1].error or "")
    assert orjson.loads(progress.read_bytes()) == {"phase": "boot", "since": 1.0}
    assert list(ledger()) == ["holder"]
    assert cleanup(run_id=attempt.run_id).containers == []


@pytest.mark.docker
def test_while_a_guest_waits_its_progress_says_so(host: Path, test_desktop_image: str) -> None:
    """What QUEUE_STATUS.md shows: the note in the attempt's progress.json, read while the guest waits; the
    guest starts once the memory is released, and its record says it waited."""
    progress = host / "result" / "progress.json"
    write_json(progress, {"phase": "boot", "since": 1.0})
    hold(2 * GIB)
    attempt = AttemptId(run_id=unique_run_id("memnote"), task_id="t", attempt=1)
    spec = GuestSpec(kind="test-desktop", image=test_desktop_image)
    with ThreadPoolExecutor(1) as pool:
        booting = pool.submit(start_guest, spec, attempt, work_dir=host / "result" / ".guest", boot_timeout_sec=120)
        shown = wait_for(lambda: _waiting(progress), timeout_sec=60, what="the wait in progress.json")
        memory.release("holder")
        guest = booting.result(timeout=180)
    try:
        assert shown["since"] == 1.0
        assert shown["phase"].startswith("boot: waiting for memory: needs 1.0 GiB and 0.5 GiB to spare; 3.0 GiB "
                                         "available, 2.0 GiB of it reserved by guests still starting")
        assert orjson.loads(progress.read_bytes()) == {"phase": "boot", "since": 1.0}
        admitted = next(s for s in guest.readiness if s.name == "memory admitted")
        assert admitted.ok and "s for memory" in (admitted.detail or "")
        assert not ledger()[guest.name].starting, "its API answered: its memory is in the available figure now"
    finally:
        remove_guest(guest)
    assert guest.name not in ledger()


def _waiting(progress: Path) -> dict | None:
    shown = orjson.loads(progress.read_bytes())
    return shown if "waiting for memory" in shown["phase"] else None
