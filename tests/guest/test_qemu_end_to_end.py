"""hcu's official guest path end to end on a real VM, from the session's snapshot of the QEMU stand-in: a panel of
one task through `run_queue` (run_task, the real Codex CLI, the real gateway, OSWorld's evaluator; only the model is
a scripted policy) that keeps its final desktop; that desktop regraded without a model call and opened again; and
`setup_canary`, from the snapshot and, when its snapshot fails to restore, booted cold with the same result.
Nothing here special-cases the stand-in: it is named by `guest_docker_image`."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import requests

from hcu import REPO_ROOT
from hcu.demo.stand_in import free_port
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest_state.kept import read
from hcu.osworld.guest_state.snapshots import ENTRY_FILE, SnapshotCache, SnapshotConfig, SnapshotEntry
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record, sha256_of_file, write_record
from tests.demo_panel import demo_config
from tests.guest.conftest import QEMU_GUEST, QEMU_RUNNER_IMAGE, qemu_spec
from tests.guest.vnc import websocket_vnc_greeting
from tests.guest.waiting import wait_for
from tests.run_task.conftest import RENAME_MATCH, RENAME_TASK, policy

pytestmark = [pytest.mark.docker, pytest.mark.kvm, pytest.mark.artifacts, pytest.mark.timeout(1800)]

PHASES = ["load", "boot", "isolate", "upload", "probe", "setup", "agent", "settle", "save desktop", "evaluate",
          "collect", "cleanup"]
RENAME = [  # a look at the VM's screen, then the rename through the code channel (no GUI timing under TCG)
    {"tool": "screenshot", "arguments": {"max_width": 640}},
    {"tool": "run_shell", "arguments": {"command": "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2"}},
]
GUEST_FLAGS = ["--guest-docker-image", QEMU_RUNNER_IMAGE, "--ram-size", QEMU_GUEST["ram_size"]]


def labelled(run_id: str, *, volumes: bool = True) -> list[str]:
    selector = {"label": ["hcu.managed=1", f"hcu.run_id={run_id}"]}
    with contextlib.closing(docker_client()) as client:
        return ([c.name for c in client.containers.list(all=True, filters=selector)]
                + ([v.name for v in client.volumes.list(filters=selector)] if volumes else []))


def console_tail(record: dict) -> str:
    """The VM's serial console when its boot failed (meta.json's guest, or a canary report), for the failure."""
    path = record.get("console_log") or (record.get("guest") or {}).get("console_log")
    return f"\n--- the VM's console ({path}):\n" + Path(path).read_text()[-4000:] if path else ""


@dataclass(frozen=True)
class QemuPanel:
    run_dir: Path
    run_id: str
    task_dir: Path
    base_sha256: str


@pytest.fixture(scope="module")
def panel(qemu_guest_disk: Path, qemu_snapshot: SnapshotEntry,
          tmp_path_factory: pytest.TempPathFactory) -> QemuPanel:
    """One task through the queue on the stand-in, keeping its final desktop (keep_final_desktop "all")."""
    folder = tmp_path_factory.mktemp("qemu-panel")
    before = sha256_of_file(qemu_guest_disk)
    policies = folder / "policies.json"
    policies.write_bytes(orjson.dumps({"policies": {"rename": policy(RENAME_MATCH, RENAME)}}))
    bridge = bridge_address()
    config = demo_config(folder, "qemu-panel", tasks=[{"id": RENAME_TASK, "task_domain": "os"}], test_desktop=None,
                         guest_image=str(qemu_guest_disk), guest_docker_image=QEMU_RUNNER_IMAGE,
                         ram_size=QEMU_GUEST["ram_size"], code_mode=True, keep_final_desktop="all",
                         timeout_seconds=900, no_progress_seconds=300, max_active_tasks=1,
                         gateway=f"http://{bridge}:{free_port(bridge)}")
    done = subprocess.run([sys.executable, "-m", "hcu.demo", "--config", str(config), "--policies", str(policies)],
                          capture_output=True, text=True, timeout=1500, cwd=REPO_ROOT)
    body = orjson.loads(config.read_bytes())
    run_dir = Path(body["results_dir"]) / body["run_id"]
    task_dir = run_dir / "tasks" / RENAME_TASK
    meta = orjson.loads((task_dir / "meta.json").read_bytes()) if (task_dir / "meta.json").is_file() else {}
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:] + console_tail(meta)
    return QemuPanel(run_dir, body["run_id"], task_dir, before)


def test_the_panel_scores_one_from_a_snapshot_start_and_keeps_the_whole_machine(panel: QemuPanel) -> None:
    r = read_record(panel.task_dir / "result.json", TaskResult)
    assert (r.status, r.score, r.termination_reason, r.protocol_word) == (
        "completed", 1.0, "completed", "TASK_COMPLETE")
    assert [p.name for p in r.phases] == PHASES and all(p.status == "ok" for p in r.phases)
    meta = read_record(panel.task_dir / "meta.json", AttemptMeta)
    guest = meta.guest
    assert guest is not None and guest.spec is not None and guest.container_image is not None
    assert guest.spec.kind == "qemu" and guest.spec.docker_image == QEMU_RUNNER_IMAGE
    assert guest.container_image.reference == QEMU_RUNNER_IMAGE and guest.container_image.id.startswith("sha256:")
    assert guest.start is not None and (guest.start.asked, guest.start.got, guest.start.reason) == (
        "snapshot", "snapshot", None), guest.start
    steps = {step.name: step for step in guest.readiness}
    assert all(step.ok for step in steps.values()) and "state restored" in steps
    assert re.fullmatch(r"guest clock [-+]\d+\.\d\d s \(\+-\d+\.\d\d s\) from the host's", steps["clock set"].detail)
    grown = re.search(r"-> ([\d.]+) GiB \(volume_size 64 GiB\)$", steps["filesystem grown"].detail or "")
    assert grown and 62.5 <= float(grown[1]) <= 64, "the snapshot's root filesystem fills the disk"
    kept = meta.final_desktop
    assert kept is not None and kept.kept and kept.holds == ["memory", "devices", "disk"], kept
    desktop = read(panel.task_dir)
    assert desktop is not None and desktop.saved.machine is not None
    machine = desktop.saved.machine
    assert machine.backing == panel.task_dir / "final-desktop" / "below.qcow2", "the snapshot disk kept with it"
    assert kept.bytes == machine.bytes == sum(path.stat().st_size for path in (machine.disk, machine.state_file))
    assert kept.save_sec == machine.seconds > 0
    assert desktop.base_sha256 == panel.base_sha256 and desktop.last_action == "DONE"
    assert list((panel.task_dir / ".guest").glob("*.qcow2")) == [], "the attempt's overlay outlived it"
    assert labelled(panel.run_id) == []


def test_its_kept_desktop_regrades_to_the_same_score_without_a_model_call(panel: QemuPanel) -> None:
    token_log = panel.run_dir / "gateway-tokens.jsonl"
    before = sha256_of_file(token_log)
    kept = {path: sha256_of_file(path) for path in (panel.task_dir / "final-desktop").glob("*.*")}
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.regrade", str(panel.run_dir)], capture_output=True,
                          text=True, timeout=900, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = read_record(panel.task_dir / "regrade.json", Regrade)
    assert (record.status, record.score_before, record.score_after) == ("completed", 1.0, 1.0), record
    assert sha256_of_file(token_log) == before, "no model call: the token log did not grow"
    assert {path: sha256_of_file(path) for path in kept} == kept, "a regrade never writes the kept desktop"
    meta = read_record(panel.run_dir / "regrade" / RENAME_TASK / "meta.json", AttemptMeta)
    assert "state restored" in [step.name for step in meta.guest.readiness]
    assert labelled(f"{panel.run_id}.regrade") == []


def test_open_desktop_serves_the_kept_machine_on_the_bridge_until_ctrl_c(panel: QemuPanel) -> None:
    opened = subprocess.Popen([sys.executable, "-m", "hcu.osworld.open_desktop", str(panel.run_dir), RENAME_TASK],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT)
    try:
        lines = [opened.stdout.readline() for _ in range(4)]
        screen = next(line.split()[1] for line in lines if line.strip().startswith("screen:"))
        api = next(line.split()[-1] for line in lines if line.strip().startswith("in-guest API:"))
        host, port = screen.removeprefix("http://").rstrip("/").split(":")
        assert host == bridge_address(), "served on the Docker bridge only"
        assert websocket_vnc_greeting(host, int(port)).startswith(b"RFB 003."), "the VM's screen"
        ls = requests.post(f"{api}/execute", json={"command": "ls ~/Desktop", "shell": True}, timeout=60).json()
        assert "todo_list_Jan_2" in ls["output"], "the desktop as the agent left it"
        opened.send_signal(signal.SIGINT)
        assert opened.wait(timeout=120) == 0, opened.stdout.read()
    finally:
        if opened.poll() is None:
            opened.kill()
            cleanup(run_id=f"{panel.run_id}.open")  # what the killed command could not remove
    assert labelled(f"{panel.run_id}.open") == []


def canary(disk: Path, out: Path, *extra: str) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--benchmark-version", "v1", "--task-id", RENAME_TASK,
         "--tasks-dir", str(REPO_ROOT / "configs" / "demo-tasks"), "--guest-image", str(disk), *GUEST_FLAGS,
         "--result-dir", str(out), "--run-evaluator", "--offline-assets", "--boot-timeout", "900", *extra],
        capture_output=True, text=True, timeout=1500, cwd=REPO_ROOT)
    report = orjson.loads((out / "report.json").read_bytes())
    assert done.returncode == 0 and report["status"] == "passed", (
        (report.get("error") or done.stderr[-3000:]) + console_tail(report))
    return done.returncode, report


def outcome(report: dict) -> tuple:
    """What a canary found, apart from how its guest started."""
    return (report["status"], [(s["type"], s["ok"]) for s in report["setup_steps"]], report["evaluator"]["score"],
            report["guest_kind"], report["volume_size_gb"])


def test_setup_canary_from_the_snapshot_and_cold_after_a_restore_fails_finds_the_same(
        qemu_guest_disk: Path, qemu_snapshot: SnapshotEntry, tmp_path: Path) -> None:
    """A snapshot whose state does not load (its file replaced, same size) is never used again: the canary boots
    cold within its boot phase, says why, and finds what the canary from a good snapshot finds."""
    _, restored = canary(qemu_guest_disk, tmp_path / "restored")
    steps = [s["name"] for s in restored["readiness"]]
    assert "state restored" in steps and steps[-1] == "clock set" and all(s["ok"] for s in restored["readiness"])
    broken = _broken_snapshot(qemu_snapshot, volume_size_gb=63)
    _, cold = canary(qemu_guest_disk, tmp_path / "cold", "--volume-size", "63")
    assert outcome(cold)[:3] == outcome(restored)[:3] and outcome(cold)[3] == "qemu"
    steps = [s["name"] for s in cold["readiness"]]
    assert "state restored" not in steps and steps[-1] == "filesystem grown", "booted cold"
    assert restored["guest_start"]["got"] == "snapshot"
    assert cold["guest_start"]["got"] == "cold" and cold["guest_start"]["reason"].startswith("failed to restore:")
    assert not (broken / ENTRY_FILE).exists(), "the snapshot that failed is never used again"
    failures = SnapshotCache().failures(SnapshotConfig.of(qemu_spec(qemu_guest_disk).model_copy(
        update={"volume_size_gb": 63})))
    assert len(failures) == 1 and failures[0].startswith("failed to restore:"), failures


def _broken_snapshot(entry: SnapshotEntry, *, volume_size_gb: int) -> Path:
    """A copy of `entry` for another volume size whose state file holds other bytes of the same size: every check
    before a restore passes, the restore fails."""
    config = entry.config.model_copy(update={"volume_size_gb": volume_size_gb})
    folder = SnapshotCache().folder / config.name
    folder.mkdir()
    shutil.copyfile(entry.machine.disk, folder / "disk.qcow2")
    (folder / "state.zst").write_bytes(os.urandom(entry.state_bytes))
    machine = entry.machine.model_copy(update={"state_file": folder / "state.zst", "disk": folder / "disk.qcow2"})
    write_record(folder / ENTRY_FILE, entry.model_copy(update={"config": config, "machine": machine}))
    return folder


@dataclass
class Cleaned:
    returncode: int
    stdout: str
    stderr: str
    before_cleanup: object
    """What `before_cleanup` said once the command was killed, before cleanup ran."""


def kill_once_its_guest_runs(command: list[str], run_id: str, before_cleanup: Callable[[], object] = lambda: None,
                             ) -> Cleaned:
    """`python -m COMMAND` killed with SIGKILL (its whole session) once a guest container labelled `run_id` exists
    (its volume comes first), then `cleanup --run-id run_id`."""
    killed = subprocess.Popen([sys.executable, "-m", *command], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: labelled(run_id, volumes=False) or None, timeout_sec=600, what=f"the guest of {command[0]}")
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
    seen = before_cleanup()
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.cleanup", "--run-id", run_id], capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
    return Cleaned(done.returncode, done.stdout, done.stderr, seen)


def test_a_regrade_killed_while_it_restores_leaves_only_what_cleanup_removes(panel: QemuPanel) -> None:
    """kill -9 of regrade once its guest is being restored: the kept desktop is as it was, no regrade.json is
    half-written, and `cleanup --run-id <run>.regrade` removes everything the regrade started."""
    kept = {path: sha256_of_file(path) for path in (panel.task_dir / "final-desktop").glob("*.*")}
    record = panel.task_dir / "regrade.json"
    before = record.read_bytes() if record.exists() else None
    regrade_run = f"{panel.run_id}.regrade"
    done = kill_once_its_guest_runs(["hcu.osworld.regrade", str(panel.run_dir)], regrade_run)
    assert done.returncode == 0 and "removed container" in done.stdout, done.stdout + done.stderr
    assert labelled(regrade_run) == []
    assert (record.read_bytes() if record.exists() else None) == before, "no regrade.json half-written"
    assert {path: sha256_of_file(path) for path in kept} == kept


def test_a_snapshot_build_killed_leaves_nothing_a_later_attempt_would_use(qemu_guest_disk: Path,
                                                                         tmp_path: Path) -> None:
    """kill -9 of prepare_guest while it builds a snapshot: no snapshot appears (a later attempt finds it missing
    and builds its own), and `cleanup` removes the warm-up's guest and the half-built folder."""
    config = demo_config(tmp_path, "prepare-killed", tasks=[{"id": RENAME_TASK, "task_domain": "os"}],
                         test_desktop=None, guest_image=str(qemu_guest_disk), guest_docker_image=QEMU_RUNNER_IMAGE,
                         ram_size=QEMU_GUEST["ram_size"], volume_size=62)
    run_id = orjson.loads(config.read_bytes())["run_id"]
    snapshot = SnapshotConfig.of(qemu_spec(qemu_guest_disk).model_copy(update={"volume_size_gb": 62}))
    cache = SnapshotCache()
    partial = cache.folder / f"{snapshot.name}.partial"
    done = kill_once_its_guest_runs(["hcu.osworld.prepare_guest", str(config)], run_id,
                                    before_cleanup=lambda: partial.is_dir() and cache.current(snapshot))
    assert done.before_cleanup == (None, "missing"), "the build was under way; a half-built snapshot is never one"
    assert done.returncode == 0 and "removed snapshot build" in done.stdout, done.stdout + done.stderr
    assert labelled(run_id) == [] and not partial.exists()
