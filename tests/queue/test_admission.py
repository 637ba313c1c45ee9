"""Per-node phase caps (attempt/node_admission.py) across real processes: never more holders than the cap, a
killed holder frees its slot, node labels parsed or refused."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from hcu.osworld.attempt.node_admission import AdmissionSettings, NodeCaps, PhaseAdmission
from tests.queue.ray_checks import peak_overlap

CONTENDER = """
import sys, time, orjson
from pathlib import Path
from hcu.osworld.attempt.node_admission import admission_from_env
admit, go, out, hold = admission_from_env(), Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
while not go.exists():
    time.sleep(0.01)
admit("agent")
entered = time.time()
time.sleep(hold)
left = time.time()
admit("collect")
out.write_bytes(orjson.dumps([entered, left]))
"""


def contenders(tmp_path: Path, caps: NodeCaps, count: int, hold_sec: float) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, **AdmissionSettings(lock_dir=tmp_path / "locks", caps=caps).env()}
    return [subprocess.Popen([sys.executable, "-c", CONTENDER, str(tmp_path / "go"), str(tmp_path / f"{i}.json"),
                              str(hold_sec)], env=env) for i in range(count)]


def test_never_more_holders_than_the_cap(tmp_path: Path):
    procs = contenders(tmp_path, NodeCaps(agent=2), 6, 0.4)
    (tmp_path / "go").touch()
    assert all(proc.wait(timeout=60) == 0 for proc in procs)
    spans = [tuple(orjson.loads((tmp_path / f"{i}.json").read_bytes())) for i in range(6)]
    assert peak_overlap(spans) == 2  # six contended at once: two held, the rest waited their turn


def test_a_group_is_held_across_its_phases_and_released_by_the_next(tmp_path: Path):
    settings = AdmissionSettings(lock_dir=tmp_path / "locks", caps=NodeCaps(boot_setup=1, evaluate=1))
    first, second = PhaseAdmission(settings), PhaseAdmission(settings)
    first.enter("boot")
    first.enter("setup")  # the same group: the same slot
    assert first.held is not None and held(tmp_path / "locks" / "boot_setup.0.lock")
    first.enter("agent")  # not capped here: boot+setup released, nothing held
    assert first.held is None and not held(tmp_path / "locks" / "boot_setup.0.lock")
    second.enter("boot")
    first.enter("evaluate")
    assert first.held is not None and second.held is not None
    first.enter("collect")
    assert first.held is None


def held(lock: Path) -> bool:
    """True when another process holds the flock on `lock`."""
    if not lock.exists():
        return False
    with lock.open("rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def test_a_killed_holder_frees_its_slot(tmp_path: Path):
    (tmp_path / "go").touch()
    holder = contenders(tmp_path, NodeCaps(agent=1), 1, 600)[0]
    deadline = time.time() + 30
    while not held(tmp_path / "locks" / "agent.0.lock"):
        assert time.time() < deadline and holder.poll() is None, "the holder never got its slot"
        time.sleep(0.05)
    waiter = contenders(tmp_path, NodeCaps(agent=1), 1, 0.1)[0]
    time.sleep(1.0)
    assert waiter.poll() is None, "the waiter got the slot the holder still had"
    os.kill(holder.pid, signal.SIGKILL)
    killed_at = time.time()
    assert waiter.wait(timeout=30) == 0
    entered, _ = orjson.loads((tmp_path / "0.json").read_bytes())
    assert entered > killed_at


@pytest.mark.parametrize("labels, message", [
    ({"hcu/agent-cap": "0"}, "hcu/agent-cap='0': expected a positive integer"),
    ({"hcu/boot-setup-cap": "four"}, "hcu/boot-setup-cap='four': expected a positive integer"),
])
def test_bad_cap_labels_are_refused(labels: dict[str, str], message: str):
    with pytest.raises(ValueError, match=message):
        NodeCaps.from_labels(labels)


def test_caps_from_labels():
    caps = NodeCaps.from_labels({"hcu/boot-setup-cap": "4", "hcu/agent-cap": "16", "hcu/evaluate-cap": "8",
                                 "hcu/node": "host-7"})
    assert (caps.boot_setup, caps.agent, caps.evaluate) == (4, 16, 8)
    assert NodeCaps.from_labels({}) == NodeCaps()
