"""A booting guest's container read by its exit code and its log: exits 88 (KVM) and 17 (memory) and the
official image's network fallback, each named in one line, at the step it happened, with nothing left behind."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from hcu.osworld.errors import ConfigurationError, GuestError, GuestMemoryError, policy_for
from hcu.osworld.guest import memory
from hcu.osworld.guest.console import exit_failure, last_error, log_lines
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.guest.lifecycle import BootRecord, GuestSpec, container_name, start_guest
from hcu.osworld.guest.memory import Reservation
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest.state_dir import locked_table
from hcu.osworld.records.identity import AttemptId
from tests.guest.conftest import QEMU_RUNNER_IMAGE
from tests.guest.host_files import host_proc
from tests.session import unique_run_id

RED, RESET = "\x1b[1;31m", "\x1b[0m"
OFFICIAL_FALLBACK = f"{RED}❯ Warning: falling back to usermode networking (slow)!{RESET}"
"""The official image's own line (qemus/qemu's network.sh, its warn() in colour)."""
OFFICIAL_MEMORY = (f"{RED}❯ ERROR: Your configured RAM_SIZE of 4 GB is too high for the 3 GB of memory available, "
                   f"please set a lower value.{RESET}")


def test_exit_88_is_a_configuration_error_naming_kvm() -> None:
    lines = log_lines(f"❯ Starting QEMU...\n{RED}❯ ERROR: KVM acceleration not available (no write access), this "
                      f"will cause a major loss of performance.{RESET}\n".encode())
    failure = exit_failure("hcu-r-t-1", 88, lines)
    assert isinstance(failure, ConfigurationError) and not policy_for(failure.classification).retry
    assert str(failure) == ("KVM: guest hcu-r-t-1: the image exited 88, it has no usable KVM on this host: ❯ ERROR: "
                            "KVM acceleration not available (no write access), this will cause a major loss of "
                            "performance.")


def test_exit_17_is_a_memory_failure_the_queue_answers_by_running_fewer() -> None:
    failure = exit_failure("g", 17, log_lines(f"❯ CPU: Test | RAM: 3/8 GB\n{OFFICIAL_MEMORY}\n".encode()))
    assert isinstance(failure, GuestMemoryError) and failure.classification == "guest_memory"
    assert str(failure).endswith("RAM_SIZE does not fit the host's available memory: ❯ ERROR: Your configured "
                                 "RAM_SIZE of 4 GB is too high for the 3 GB of memory available, please set a lower "
                                 "value.")
    policy = policy_for("guest_memory")
    assert policy.retry and policy.lowers_active_tasks and not policy.scored


def test_another_exit_quotes_the_last_error_line_or_the_last_line() -> None:
    assert str(exit_failure("g", 1, ["booting", "hcu-qemu: error: no default route", "bye"])) == \
        "container exited (exit code 1): hcu-qemu: error: no default route"
    assert last_error(["one", "two"]) == "two" and str(exit_failure("g", 0, [])) == "container exited (exit code 0)"


@pytest.fixture
def fallback_image() -> Iterator[str]:
    """An image standing in for an official guest whose NAT setup failed: it says so the way the official image
    does, then never serves its API (user-mode networking forwards no port 5000)."""
    tag = f"hcu-test-network-fallback:{uuid.uuid4().hex[:8]}"
    script = f"printf '%s\\n' '❯ Starting...' '{OFFICIAL_FALLBACK}'; exec sleep 600"
    with contextlib.closing(docker_client()) as client:
        base = client.containers.create(QEMU_RUNNER_IMAGE, labels={"hcu.managed": "1", "hcu.run_id": "fallback"})
        try:  # the runner image only for its bash: the stand-in's own fallback is tested in test_qemu_runner.py
            base.commit(*tag.split(":"), changes=["CMD " + orjson.dumps(["bash", "-c", script]).decode()])
        finally:
            base.remove(v=True, force=True)
        yield tag
        client.images.remove(tag, force=True)


@pytest.mark.docker
def test_the_network_fallback_fails_the_boot_within_seconds_naming_the_line(
    fallback_image: str, qemu_guest_disk: Path, tmp_path: Path
) -> None:
    attempt = AttemptId(run_id=unique_run_id("fallback"), task_id="t", attempt=1)
    spec = GuestSpec(kind="test-desktop", image=fallback_image)
    boot = BootRecord()
    with pytest.raises(GuestError) as failed:
        start_guest(spec, attempt, work_dir=tmp_path / "work", boot_timeout_sec=3600, boot=boot)
    message = str(failed.value)
    assert failed.value.classification == "guest" and "\n" not in message
    assert message.endswith("the image fell back to user-mode networking (its NAT setup failed), which forwards no "
                            "port 5000, so its API can never answer: ❯ Warning: falling back to usermode networking "
                            "(slow)!")
    failed_steps = [s.name for s in boot.readiness if not s.ok]
    assert failed_steps in (["container running"], ["api answers"]), "found while waiting, not at the deadline"
    assert cleanup(run_id=attempt.run_id).containers == []


@pytest.mark.docker
def test_an_image_that_exits_17_is_classified_and_its_memory_released(
    qemu_guest_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hcu's reading (a meminfo of the test's own) lets a 1000G guest start; the stand-in, reading the real
    host as the official image does, exits 17."""
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc", total_kib=4 << 30, available_kib=4 << 30)))
    attempt = AttemptId(run_id=unique_run_id("exit17"), task_id="t", attempt=1)
    spec = GuestSpec(kind="qemu", image=str(qemu_guest_disk), docker_image=QEMU_RUNNER_IMAGE, ram_size="1000G")
    boot = BootRecord()
    with pytest.raises(GuestMemoryError) as refused:
        start_guest(spec, attempt, work_dir=tmp_path / "result" / "work", boot=boot)
    assert str(refused.value).startswith(f"guest {container_name(attempt)}: the image exited 17, RAM_SIZE does not "
                                         "fit the host's available memory: hcu-qemu: error: RAM_SIZE=1000G is too "
                                         "high for the ")
    steps = {s.name: s.ok for s in boot.readiness}
    assert steps["memory admitted"] and not all(steps.values())
    with locked_table(memory.LEDGER, Reservation) as ledger:
        assert container_name(attempt) not in ledger
    assert Path(boot.console_log or "").read_text().strip().endswith("(it needs RAM_SIZE plus 500 MB)")
    assert cleanup(run_id=attempt.run_id).containers == []

