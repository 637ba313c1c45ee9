"""A QEMU guest's whole machine saved to files and restored into a new guest, through its monitor (monitor.py).

A save pauses the VM, copies what the VM wrote (the top of its disk chain) into a new qcow2 with QEMU's own
backup job, writes its memory and device state as a compressed migration stream (`exec:zstd`), then either
continues the VM (a final desktop kept before the evaluator reads it) or ends it (a snapshot's warm-up). Both
files appear under their final names only when complete, so a save cut short leaves only `*.partial` files.

A restore starts QEMU with `-incoming defer` on a disk with the saved content (a new overlay over the saved
disk: kinds.QemuGuest), feeds it the stream, and continues the VM. Facts this rests on (QEMU 7.2, Debian 12):
the destination needs the same machine, devices and RAM and the disk the VM had when it was paused; a VM saved
while paused is restored paused; the migration throttle (`max-bandwidth`) applies to the save only.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from hcu.osworld.guest.monitor import Monitor, MonitorError

STATE_FILE = "state.zst"
DISK_FILE = "disk.qcow2"
BELOW_FILE = "below.qcow2"
"""Beside a save whose disk stands on another saved disk (a snapshot's): that disk's own link."""
SAVE_PATH = "/hcu-save"
"""Where a save writes, in the guest's container (a host folder mounted read-write)."""
RESTORE_PATH = "/hcu-restore"
"""Where the state file to restore is, in the guest's container (its host folder mounted read-only)."""
BOOT_DISK = "/System.qcow2"
"""The disk the runner boots, as the runner names it: the backing file of the copy of the VM's writes."""
SAVE_BANDWIDTH = 8 << 30
"""Bytes per second a save may write (QEMU's default throttle would stretch a 1 GiB state over tens of seconds)."""
BACKUP_JOB = "hcu-save"
QEMU_IMG_TIMEOUT_SEC = 120.0


class SavedMachine(BaseModel):
    """A paused QEMU guest on disk: its memory and devices, and its disk as a qcow2 over a read-only image."""

    state_file: Path
    """QEMU's migration stream, zstd-compressed."""
    disk: Path
    """What the VM wrote, over `backing` (the image it booted from)."""
    backing: Path
    """The read-only image under `disk`: the base image, or the frozen disk of the snapshot the guest started from."""
    qemu_version: str | None
    """The QEMU that saved it (a restore needs a compatible one)."""
    bytes: int
    """Both files' size on disk."""
    seconds: float
    """How long the VM was paused to save it."""


def save(monitor: Monitor, host_dir: Path, backing: Path, *, then: Literal["continue", "quit"],
         timeout_sec: float) -> SavedMachine:
    """Pause the VM, save it into `host_dir` (mounted at SAVE_PATH), then continue or end it. The VM continues
    whether or not the save succeeded (`then="continue"`): what reads the guest next never depends on a save. Raises
    MonitorError (or OSError: a full disk) when the save did not complete; its partial files are removed."""
    started = time.monotonic()
    deadline = started + timeout_sec
    disk, state = host_dir / DISK_FILE, host_dir / STATE_FILE
    monitor.execute("stop")
    try:
        _copy_writes(monitor, deadline)
        _write_state(monitor, deadline)
        _rebase(_partial(disk), backing)
        os.replace(_partial(disk), disk)
        os.replace(_partial(state), state)
    except BaseException:
        for path in (_partial(disk), _partial(state)):
            path.unlink(missing_ok=True)
        raise
    finally:
        if then == "continue":
            monitor.execute("cont")
    paused = round(time.monotonic() - started, 3)
    if then == "quit":
        monitor.quit()
    return SavedMachine(state_file=state, disk=disk, backing=backing, qemu_version=monitor.version,
                        bytes=disk.stat().st_size + state.stat().st_size, seconds=paused)


def restore(monitor: Monitor, *, timeout_sec: float) -> None:
    """Feed a QEMU started with `-incoming defer` the state file at RESTORE_PATH, then run the VM. A stream that
    does not decompress ends QEMU (QEMU 7.2 would wait on it forever): the monitor's connection drops at once."""
    monitor.execute("migrate-incoming", {"uri": f"exec:zstd -dcq {RESTORE_PATH}/{STATE_FILE} || kill $PPID"})
    status = monitor.wait_for("query-migrate", lambda answer: answer.get("status") in ("completed", "failed"),
                              timeout_sec=timeout_sec, what="loading the saved state")
    if status["status"] != "completed":
        raise MonitorError(f"QEMU could not load the saved state: {status.get('error-desc', status)}")
    monitor.execute("cont")


def _boot_device(monitor: Monitor) -> str:
    """The block device the VM boots from: the one whose chain holds the runner's boot disk."""
    for device in monitor.execute("query-block"):
        image = (device.get("inserted") or {}).get("image")
        while image is not None:
            if image.get("filename") == BOOT_DISK:
                return device["device"] or device["qdev"]
            image = image.get("backing-image")
    raise MonitorError(f"QEMU monitor: no block device boots {BOOT_DISK}")


def _copy_writes(monitor: Monitor, deadline: float) -> None:
    """The top of the boot device's chain (what the VM wrote) into a new qcow2 over the same backing file."""
    monitor.execute("drive-backup", {
        "job-id": BACKUP_JOB, "device": _boot_device(monitor), "sync": "top", "format": "qcow2",
        "target": f"{SAVE_PATH}/{DISK_FILE}.partial", "mode": "absolute-paths", "auto-dismiss": False})
    jobs = monitor.wait_for("query-jobs", lambda answer: _job(answer)["status"] == "concluded",
                            timeout_sec=max(deadline - time.monotonic(), 1.0), what="copying the disk's writes")
    monitor.execute("job-dismiss", {"id": BACKUP_JOB})
    if _job(jobs).get("error"):
        raise MonitorError(f"QEMU could not copy the disk's writes: {_job(jobs)['error']}")


def _job(jobs: list[dict]) -> dict:
    return next((job for job in jobs if job["id"] == BACKUP_JOB), {"status": "concluded", "error": "job vanished"})


def _write_state(monitor: Monitor, deadline: float) -> None:
    monitor.execute("migrate-set-parameters", {"max-bandwidth": SAVE_BANDWIDTH})
    monitor.execute("migrate", {"uri": f"exec:zstd -q -1 -T0 > {SAVE_PATH}/{STATE_FILE}.partial"})
    status = monitor.wait_for("query-migrate", lambda answer: answer.get("status") in ("completed", "failed"),
                              timeout_sec=max(deadline - time.monotonic(), 1.0), what="writing the VM's state")
    if status["status"] != "completed":
        raise MonitorError(f"QEMU could not write the VM's state: {status.get('error-desc', status)}")


def _rebase(disk: Path, backing: Path) -> None:
    """The copy names its backing file as the container saw it (BOOT_DISK, over an empty per-attempt overlay): name
    the host's image under that overlay instead. Only the header changes."""
    done = subprocess.run(["qemu-img", "rebase", "-u", "-F", "qcow2", "-b", str(backing), str(disk)],
                          capture_output=True, text=True, timeout=QEMU_IMG_TIMEOUT_SEC, check=False)
    if done.returncode != 0:
        raise OSError(f"qemu-img rebase {disk}: {done.stderr.strip()}")


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")
