"""Guest start from a snapshot against a cold boot, on the QEMU stand-in (`hcu-qemu-guest:tcg`, a 4G guest, 64 GiB
volume), and what keeping a final desktop and regrading cost.

Printed, in one process:
- start to ready (every readiness step, the restored guest's clock set): cold boots, then starts from this host's
  snapshot, and the ratio snapshot/cold (the snapshot's one-time warm-up printed apart);
- keeping a final desktop: the seconds the guest is held and the bytes on disk, for a restored guest after a
  little work (a file written, an application started);
- regrading against a whole attempt: one task through the queue from the snapshot with its desktop kept, then
  `regrade` of it, each timed (the attempt's duration from result.json, the regrade's from regrade.json);
- a canary sweep over the demo's tasks of three domains (os, chrome, vlc) with `guest_start` cold, then snapshot:
  wall time of each sweep, their ratio, and whether each domain's canary found the same (status, setup steps,
  evaluator score) both ways.
Run standalone: `python bench/bench_guest_start.py` (about 7 minutes under TCG on a quiet 2-core machine).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

from hcu import REPO_ROOT
from hcu.demo.stand_in import free_port
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.kinds import GuestSpec
from hcu.osworld.guest.lifecycle import BootRecord, remove_guest
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest.state_dir import STATE_DIR_ENV
from hcu.osworld.guest_state.snapshots import SnapshotCache
from hcu.osworld.guest_state.start import start
from hcu.osworld.records.identity import AttemptId

RUNNER = "hcu-qemu-guest:tcg"
DISK = REPO_ROOT / "build" / "qemu-guest" / "test-desktop.qcow2"
ROUNDS = 2
TIMEOUT_SEC = 1500.0
SPEC = GuestSpec(kind="qemu", image=str(DISK.resolve()), docker_image=RUNNER, volume_size_gb=64, ram_size="4G")
TASKS_DIR = REPO_ROOT / "configs" / "demo-tasks"
SWEEP_TASKS = {"os": "e0df059f-28a6-4169-924f-b9623e7184cc", "chrome": "af630914-714e-4a24-a7bb-f9af687d3b91",
               "vlc": "a5bbbcd5-b398-4c91-83d4-55e1e31bbb81"}
RENAME = {"match": 'change its name into "todo_list_Jan_2"', "final_message": "Done.\nTASK_COMPLETE", "steps": [
    {"tool": "run_shell", "arguments": {"command": "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2"}}]}


def timed_starts(run_id: str, work: Path, asked: str) -> list[float]:
    seconds = []
    for n in range(1, ROUNDS + 1):
        started = time.monotonic()
        guest, record = start(SPEC, AttemptId(run_id=run_id, task_id=asked, attempt=n), asked=asked, cache_dir=None,
                              work_dir=work, boot_timeout_sec=TIMEOUT_SEC, boot=BootRecord(),
                              progress_file=work / "progress.json", save_dir=None)
        seconds.append(time.monotonic() - started)
        assert record.got == asked, record
        remove_guest(guest)
    return seconds


def keep_cost(run_id: str, work: Path) -> tuple[float, int]:
    save_dir = work / "keep"
    save_dir.mkdir()
    guest, _ = start(SPEC, AttemptId(run_id=run_id, task_id="keep", attempt=1), asked="snapshot", cache_dir=None,
                     work_dir=work, boot_timeout_sec=TIMEOUT_SEC, boot=BootRecord(),
                     progress_file=work / "progress.json", save_dir=save_dir)
    try:
        guest.api.execute("head -c 50M /dev/urandom > ~/Desktop/work.bin; (nohup xterm >/dev/null 2>&1 &); sleep 3",
                          shell=True, timeout_sec=120)
        saved = guest.save_desktop(timeout_sec=600)
        return saved.seconds, saved.bytes
    finally:
        remove_guest(guest)


def attempt_and_regrade(folder: Path) -> tuple[float, float]:
    """A one-task panel from the snapshot, its desktop kept; then its regrade. (attempt seconds, regrade seconds)"""
    policies = folder / "policies.json"
    policies.write_bytes(orjson.dumps({"policies": {"rename": RENAME}}))
    body = orjson.loads((REPO_ROOT / "configs" / "demo.json").read_bytes())
    bridge = bridge_address()
    body.update(run_id=f"bench-regrade-{uuid.uuid4().hex[:6]}", results_dir=str(folder / "runs"),
                tasks_dir=str(TASKS_DIR), tasks=[{"id": SWEEP_TASKS["os"], "task_domain": "os"}], test_desktop=None,
                guest_image=SPEC.image, guest_docker_image=RUNNER, ram_size=SPEC.ram_size, code_mode=True,
                keep_final_desktop="all", timeout_seconds=1200, gateway=f"http://{bridge}:{free_port(bridge)}")
    config = folder / "panel.json"
    config.write_bytes(orjson.dumps(body))
    run_dir = folder / "runs" / body["run_id"]
    try:
        subprocess.run([sys.executable, "-m", "hcu.demo", "--config", str(config), "--policies", str(policies)],
                       check=True, capture_output=True, timeout=TIMEOUT_SEC, cwd=REPO_ROOT)
        subprocess.run([sys.executable, "-m", "hcu.osworld.regrade", str(run_dir)], check=True, capture_output=True,
                       timeout=TIMEOUT_SEC, cwd=REPO_ROOT)
    finally:
        cleanup(run_id=body["run_id"])
        cleanup(run_id=f"{body['run_id']}.regrade")
    task = run_dir / "tasks" / SWEEP_TASKS["os"]
    attempt = orjson.loads((task / "result.json").read_bytes())["duration_sec"]
    return attempt, orjson.loads((task / "regrade.json").read_bytes())["duration_sec"]


def found(report: dict) -> tuple:
    """What a canary found, apart from how its guest started (the status, each setup step, the evaluator's score)."""
    return (report["status"], [(step["type"], step["ok"]) for step in report["setup_steps"]],
            (report.get("evaluator") or {}).get("score"))


def sweep(folder: Path, guest_start: str) -> tuple[float, dict[str, tuple]]:
    """The sweep's wall time and what each domain's canary found."""
    index = folder / f"index-{guest_start}.json"
    index.write_bytes(orjson.dumps({domain: [task] for domain, task in SWEEP_TASKS.items()}))
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "hcu.osworld.canary_sweep", "--out", str(folder / f"sweep-{guest_start}"),
                    "--index", str(index), "--tasks-dir", str(TASKS_DIR), "--guest-image", SPEC.image,
                    "--guest-docker-image", RUNNER, "--ram-size", SPEC.ram_size, "--guest-start", guest_start,
                    "--offline-assets", "--max-parallel", "1", "--boot-timeout", str(TIMEOUT_SEC)], check=True,
                   capture_output=True, timeout=3 * TIMEOUT_SEC, cwd=REPO_ROOT)
    seconds = time.monotonic() - started
    reports = folder / f"sweep-{guest_start}" / "tasks"
    return seconds, {domain: found(orjson.loads((reports / domain / task / "report.json").read_bytes()))
                     for domain, task in SWEEP_TASKS.items()}


def main() -> None:
    run_id = f"bench-start-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        os.environ[STATE_DIR_ENV] = str(work / "state")  # a cache of its own: the first snapshot is built here
        try:
            cold = timed_starts(run_id, work / "cold", "cold")
            started = time.monotonic()
            SnapshotCache().ensure(SPEC, AttemptId(run_id=run_id, task_id="warm-up", attempt=1),
                                   deadline=started + TIMEOUT_SEC)
            warm_up = time.monotonic() - started
            restored = timed_starts(run_id, work / "snapshot", "snapshot")
            keep_sec, keep_bytes = keep_cost(run_id, work)
        finally:
            cleanup(run_id=run_id)
        attempt, regraded = attempt_and_regrade(work)
        sweeps = {mode: sweep(work, mode) for mode in ("cold", "snapshot")}
    cold_mean, restored_mean = statistics.mean(cold), statistics.mean(restored)
    print(f"QEMU stand-in ({RUNNER}, RAM {SPEC.ram_size}, volume {SPEC.volume_size_gb} GiB), {ROUNDS} rounds each")
    print(f"  cold boot to ready:       {cold_mean:7.1f} s   (each: {', '.join(f'{s:.1f}' for s in cold)})")
    print(f"  snapshot start to ready:  {restored_mean:7.1f} s   (each: {', '.join(f'{s:.1f}' for s in restored)})")
    print(f"  ratio snapshot/cold:      {restored_mean / cold_mean:7.2f}x   (the snapshot's one-time warm-up and save: "
          f"{warm_up:.1f} s)")
    print(f"  keeping a final desktop:  {keep_sec:7.1f} s held, {keep_bytes / 1e6:.0f} MB on disk")
    print(f"  regrade of a kept desktop: {regraded:6.1f} s   against its whole attempt {attempt:.1f} s "
          f"({regraded / attempt:.2f}x)")
    (cold_sec, cold_found), (snapshot_sec, snapshot_found) = sweeps["cold"], sweeps["snapshot"]
    print(f"  canary sweep of {len(SWEEP_TASKS)} tasks ({', '.join(SWEEP_TASKS)}): cold {cold_sec:.1f} s, "
          f"snapshot {snapshot_sec:.1f} s ({snapshot_sec / cold_sec:.2f}x)")
    for domain in SWEEP_TASKS:
        same = "the same" if cold_found[domain] == snapshot_found[domain] else "DIFFERENT"
        print(f"    {domain}: {same} cold and from the snapshot: {snapshot_found[domain][0]}, "
              f"{len(snapshot_found[domain][1])} setup steps, evaluator score {snapshot_found[domain][2]}")


if __name__ == "__main__":
    main()
