"""The host check: KVM as the official image tests it (a writable /dev/kvm, vmx or svm among the CPU's flags),
before a queue launches anything and in start_guest; the host's memory as hcu reads it. The host's meminfo and
cpuinfo come from $HCU_HOST_PROC, pointed here at files of the test's own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import (
    HOST_PROC_ENV,
    HostMemory,
    boots_with_kvm,
    check_kvm,
    kvm_problem,
    read_memory,
    size_bytes,
)
from hcu.osworld.guest.kinds import check_host
from hcu.osworld.guest.lifecycle import BootRecord, GuestSpec, start_guest
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.settings import GuestSettings
from tests.guest.conftest import QEMU_RUNNER_IMAGE, QEMU_RUNNER_REPO
from tests.guest.host_files import host_proc
from tests.session import unique_run_id


def writable_device(tmp_path: Path) -> Path:
    device = tmp_path / "kvm"
    device.write_bytes(b"")
    return device


def test_kvm_needs_a_writable_device_and_the_virtualisation_flags(tmp_path: Path) -> None:
    proc, device = host_proc(tmp_path / "proc"), writable_device(tmp_path)
    assert kvm_problem(device, proc / "cpuinfo") is None
    assert kvm_problem(tmp_path / "no-kvm", proc / "cpuinfo") == f"{tmp_path / 'no-kvm'} is missing"
    unwritable = tmp_path / "kvm-dir"  # root may write any file: a directory is what it cannot open for writing
    unwritable.mkdir()
    assert kvm_problem(unwritable, proc / "cpuinfo") == f"{unwritable} is not writable (Is a directory)"
    amd = host_proc(tmp_path / "amd", flags="fpu vme svm npt")
    assert kvm_problem(device, amd / "cpuinfo") is None
    plain = host_proc(tmp_path / "plain", flags="fpu vme de pse tsc hypervisor")
    with pytest.raises(ConfigurationError) as refused:
        check_kvm(device, plain / "cpuinfo")
    message = str(refused.value)
    assert message.startswith(f"KVM: the CPU flags in {plain / 'cpuinfo'} show neither vmx nor svm")
    assert message.endswith("the official guest needs KVM (its image exits 88 without it)") and "\n" not in message


def test_memory_is_read_from_the_host_meminfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc", total_kib=3 << 20, available_kib=1 << 20)))
    assert read_memory() == HostMemory(total=3 << 30, available=1 << 30)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       1024 kB\n")
    with pytest.raises(ConfigurationError, match=r"meminfo: no MemAvailable line \(expected a Linux meminfo\)"):
        read_memory()
    assert [size_bytes(s) for s in ("4G", "8192M", "1T")] == [4 << 30, 8 << 30, 1 << 40]


@pytest.mark.docker
def test_an_image_boots_with_kvm_unless_its_environment_says_kvm_n(qemu_guest_disk: Path) -> None:
    with contextlib.closing(docker_client()) as client:
        assert not boots_with_kvm(client, QEMU_RUNNER_IMAGE)  # the stand-in's :tcg has ENV KVM=N
        assert boots_with_kvm(client, f"{QEMU_RUNNER_REPO}:latest")
        assert boots_with_kvm(client, "hcu-no-such-image:never-pulled"), "as the official image, before its pull"


@pytest.mark.docker
def test_the_host_check_asks_only_an_official_guest_that_boots_with_kvm(
    qemu_guest_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc", flags="fpu vme hypervisor")))
    check_host(GuestSettings(test_desktop=True))
    check_host(GuestSettings(guest_image=qemu_guest_disk, guest_docker_image=QEMU_RUNNER_IMAGE))
    with pytest.raises(ConfigurationError, match=r"^KVM: .*the official guest needs KVM"):
        check_host(GuestSettings(guest_image=qemu_guest_disk, guest_docker_image=f"{QEMU_RUNNER_REPO}:latest"))


@pytest.mark.docker
def test_start_guest_refuses_a_host_without_kvm_before_anything_exists(
    make_qcow2: Callable[[str, str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc", flags="fpu vme hypervisor")))
    spec = GuestSpec(kind="qemu", image=str(make_qcow2("guest.qcow2", "1G")), volume_size_gb=1,
                     docker_image=f"{QEMU_RUNNER_REPO}:latest")
    attempt = AttemptId(run_id=unique_run_id("nokvm"), task_id="t", attempt=1)
    boot = BootRecord()
    with pytest.raises(ConfigurationError, match=r"^KVM: .*the official guest needs KVM"):
        start_guest(spec, attempt, work_dir=tmp_path / "work", boot=boot)
    assert [(s.name, s.ok) for s in boot.readiness] == [("image checked", False)]
    selector = {"label": [f"hcu.run_id={attempt.run_id}"]}
    with contextlib.closing(docker_client()) as client:
        assert client.containers.list(all=True, filters=selector) == []
        assert client.volumes.list(filters=selector) == []


@pytest.mark.docker
def test_a_queue_on_a_host_without_kvm_refuses_before_its_first_launch(
    qemu_guest_disk: Path, tmp_path: Path
) -> None:
    """The panel preflight (the local executor's): one line, exit 2, nothing written in the run directory."""
    proc = host_proc(tmp_path / "proc", flags="fpu vme hypervisor")
    config = tmp_path / "panel.json"
    config.write_bytes(orjson.dumps({
        "run_id": unique_run_id("nokvm-queue"), "benchmark_version": "v1", "agent": "codex", "tasks": ["t1"],
        "guest_image": str(qemu_guest_disk), "guest_docker_image": f"{QEMU_RUNNER_REPO}:latest",
        "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path / "runs")}))
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(config)], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, env={**os.environ, HOST_PROC_ENV: str(proc)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: KVM: ") and done.stderr.count("\n") == 1, done.stderr
    assert "the official guest needs KVM" in done.stderr
    run_dir = tmp_path / "runs" / orjson.loads(config.read_bytes())["run_id"]
    assert not (run_dir / "config.json").exists() and not (run_dir / "tasks").exists()

