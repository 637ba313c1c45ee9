"""Cleanup by labels: after a runner is killed mid-boot, and as a CLI."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from docker.models.containers import Container

from hcu.osworld.cleanup import cleanup
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import container_name, volume_name
from hcu.osworld.guest.state_dir import state_dir
from hcu.osworld.records.identity import AttemptId
from tests.guest.conftest import QEMU_RUNNER_IMAGE

pytestmark = pytest.mark.docker

BOOT = """
import sys
from pathlib import Path
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.guest.lifecycle import GuestSpec, start_guest
image, docker_image, run_id, work_dir = sys.argv[1:]
spec = GuestSpec(kind="qemu", image=image, docker_image=docker_image, volume_size_gb=64)
start_guest(spec, AttemptId(run_id=run_id, task_id="boot", attempt=1), work_dir=Path(work_dir))
print("booted")
"""


def run_filter(run_id: str) -> dict[str, list[str]]:
    return {"label": ["hcu.managed=1", f"hcu.run_id={run_id}"]}


def leases() -> dict:
    path = state_dir() / "ports.json"
    return orjson.loads(path.read_bytes()) if path.exists() else {}


def wait_booting(run_id: str, timeout_sec: float = 120.0) -> Container:
    """The run's container as soon as its VM boots (QEMU started, long before the guest's API answers)."""
    deadline = time.monotonic() + timeout_sec
    with contextlib.closing(docker_client()) as client:
        while time.monotonic() < deadline:
            for container in client.containers.list(filters={**run_filter(run_id), "status": ["running"]}):
                if b"hcu-qemu: booting /System.qcow2" in container.logs():
                    return container
            time.sleep(0.2)
    raise AssertionError("the booting process never started its VM")


@pytest.mark.kvm
def test_kill_9_while_the_vm_boots_then_cleanup_leaves_nothing(qemu_guest_disk: Path, tmp_path: Path) -> None:
    run_id = f"test-kill-{uuid.uuid4().hex[:8]}"
    name = container_name(AttemptId(run_id=run_id, task_id="boot", attempt=1))
    work_dir = tmp_path / "work"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BOOT,
            str(qemu_guest_disk),
            QEMU_RUNNER_IMAGE,
            run_id,
            str(work_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        container = wait_booting(run_id)
        container.pause()  # hold the runner inside its readiness wait, whatever the machine's speed
        time.sleep(0.5)
        assert runner.poll() is None, "the runner finished booting before it could be killed"
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)

    overlay = work_dir / f"{name}.qcow2"
    assert overlay.exists() and name in leases()  # what a killed runner leaves behind

    report = cleanup(run_id=run_id)

    assert report.containers == [name] and report.volumes == [volume_name(name)]
    assert report.overlays == [str(overlay)] and report.port_leases == [name]
    with contextlib.closing(docker_client()) as client:
        assert client.containers.list(all=True, filters=run_filter(run_id)) == []
        assert client.volumes.list(filters=run_filter(run_id)) == []
    assert not overlay.exists() and name not in leases()
    assert not (state_dir() / "overlays" / f"{name}.json").exists()


def test_cleanup_selects_by_every_given_label() -> None:
    run_a, run_b = (f"test-sel-{uuid.uuid4().hex[:8]}" for _ in range(2))
    attempts = [
        AttemptId(run_id=run_a, task_id="t1", attempt=1),
        AttemptId(run_id=run_a, task_id="t1", attempt=2),
        AttemptId(run_id=run_a, task_id="t2", attempt=1),
        AttemptId(run_id=run_b, task_id="t1", attempt=2),
    ]
    with contextlib.closing(docker_client()) as client:
        for attempt in attempts:
            client.volumes.create(name=volume_name(container_name(attempt)), labels=attempt.labels())
    try:
        assert cleanup(run_id=run_a, task_id="t1", attempt=2).volumes == [
            volume_name(container_name(attempts[1]))
        ]
        assert sorted(cleanup(run_id=run_a).volumes) == sorted(
            volume_name(container_name(a)) for a in attempts[::2]
        )
        assert cleanup(run_id=run_a).volumes == []
    finally:
        assert cleanup(run_id=run_b).volumes == [volume_name(container_name(attempts[3]))]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hcu.osworld.cleanup", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args", [[], ["--attempt", "0"], ["--attempt", "one"], ["--all", "--run-id", "r"], ["--bogus"]]
)
def test_cli_rejects_bad_flags_with_one_line(args: list[str]) -> None:
    done = cli(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1].startswith("python -m")


def test_cli_prints_what_it_removed(make_qcow2: Callable[[str, str], Path], tmp_path: Path) -> None:
    attempt = AttemptId(run_id=f"test-cli-{uuid.uuid4().hex[:8]}", task_id="t", attempt=1)
    name = container_name(attempt)
    with contextlib.closing(docker_client()) as client:
        client.volumes.create(name=volume_name(name), labels=attempt.labels())
    overlay = overlays.create_overlay(
        make_qcow2("base.qcow2", "1G"), tmp_path / "o.qcow2", name, attempt.labels()
    )

    done = cli("--run-id", attempt.run_id)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"removed volume {volume_name(name)}", f"removed overlay {overlay}"]
    assert not overlay.exists()
    assert cli("--run-id", attempt.run_id).stdout == "nothing to remove\n"
