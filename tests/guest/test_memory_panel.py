"""A panel that asks for more guests at once than the host's memory holds: the real queue, run_task, agent CLI,
gateway and evaluator (the demo's stack) on the test desktop, with a host whose meminfo ($HCU_HOST_PROC) has room
for two test desktops and for one of them starting at a time. They run in turn, none runs out of memory, and
QUEUE_STATUS.md says when one waits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import free_port
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.demo_panel import demo_config
from tests.guest.host_files import host_proc

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld, pytest.mark.timeout(1800)]

OS_TASKS = ["e0df059f-28a6-4169-924f-b9623e7184cc", "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa",
            "a4d98375-215b-4a4d-aee9-3d4370fccc41"]
TOTAL_KIB = 5 << 19
"""2.5 GiB: with the 0.5 GiB margin, room for two test desktops (1 GiB each) at once."""
AVAILABLE_KIB = 13 << 17
"""1.625 GiB available: one test desktop and the margin, so one starts at a time."""
WAITING = "boot: waiting for memory"


def test_a_panel_larger_than_memory_runs_its_guests_in_turn_and_none_runs_out(tmp_path: Path) -> None:
    proc = host_proc(tmp_path / "proc", total_kib=TOTAL_KIB, available_kib=AVAILABLE_KIB)
    bridge = bridge_address()
    config = demo_config(tmp_path, "memory-panel", tasks=[{"id": t, "task_domain": "os"} for t in OS_TASKS],
                         max_active_tasks=3, launch_stagger_seconds=0, settle_seconds=0,
                         gateway=f"http://{bridge}:{free_port(bridge)}")
    body = orjson.loads(config.read_bytes())
    run_dir = Path(body["results_dir"]) / body["run_id"]
    demo = subprocess.Popen([sys.executable, "-m", "hcu.demo", "--config", str(config)], cwd=REPO_ROOT,
                            env={**os.environ, HOST_PROC_ENV: str(proc)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen_waiting = ""
    while demo.poll() is None and not seen_waiting:  # the status the queue rewrites every second
        status = run_dir / "QUEUE_STATUS.md"
        seen_waiting = next((line for line in (status.read_text() if status.exists() else "").splitlines()
                             if WAITING in line), "")
        time.sleep(0.2)
    output, _ = demo.communicate(timeout=1500)
    assert demo.returncode == 0, output[-3000:]
    assert seen_waiting.startswith("| ") and "needs 1.0 GiB" in seen_waiting, "an active row said it waited"

    assert not (run_dir / "retries").exists(), "no attempt set aside: none ran out of memory"
    lifetimes, waited = [], 0
    for task in OS_TASKS:
        result = read_record(run_dir / "tasks" / task / "result.json", TaskResult)
        assert result.failure_classification is None, result.failure_message
        guest = read_record(run_dir / "tasks" / task / "meta.json", AttemptMeta).guest
        assert guest is not None, task
        admitted = next(step for step in guest.readiness if step.name == "memory admitted")
        waited += "s for memory" in (admitted.detail or "")
        phases = {phase.name: phase for phase in result.phases}
        until_admitted = sum(s.duration_sec for s in guest.readiness[:guest.readiness.index(admitted) + 1])
        lifetimes.append((phases["boot"].started_at + until_admitted, phases["cleanup"].started_at))
    assert waited >= 1, "the third guest waited for one of the first two to go"
    assert peak(lifetimes) <= 2, f"more guests at once than the host's memory holds: {lifetimes}"


def peak(spans: list[tuple[float, float]]) -> int:
    running = most = 0
    for _, step in sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans]):
        running += step
        most = max(most, running)
    return most
