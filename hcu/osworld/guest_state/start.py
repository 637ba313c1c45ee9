"""How an attempt's guest starts: restored from this host's snapshot of its configuration, or booted cold, and on
record which one it got and, when a snapshot was asked for and not used, why.

A snapshot start never fails an attempt that a cold boot would not: a kind that cannot restore, a snapshot that is
missing and cannot be built, or a restore that fails all end in a cold boot within the same boot phase (and a
snapshot that failed to restore is never used again: snapshots.SnapshotCache.restore_failed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from hcu.defaults import GuestStart
from hcu.osworld.errors import GuestError
from hcu.osworld.guest.kinds import GuestSpec
from hcu.osworld.guest.lifecycle import BootRecord, Guest, start_guest
from hcu.osworld.guest.readiness import ReadinessStep
from hcu.osworld.guest_state.snapshots import SnapshotCache
from hcu.osworld.records.identity import AttemptId


class StartRecord(BaseModel):
    """meta.json's `guest.start`: how the guest started."""

    asked: GuestStart
    got: Literal["snapshot", "cold"]
    reason: str | None = None
    """Why a snapshot was asked for and the guest booted cold (missing and not built, stale, torn, failed to
    restore, a kind that cannot restore)."""
    snapshot: str | None = None
    """The snapshot it restored (or failed to restore): `<config>/<build id>`."""
    built_snapshot: bool = False
    """This attempt built the snapshot first (its boot phase holds the warm-up)."""
    failed_restore: list[ReadinessStep] = []
    """The readiness steps of a restore that failed, before the cold boot."""


def start(spec: GuestSpec, attempt: AttemptId, *, asked: GuestStart, cache_dir: Path | None, work_dir: Path,
          boot_timeout_sec: float, boot: BootRecord, progress_file: Path, save_dir: Path | None,
          ) -> tuple[Guest, StartRecord]:
    """The attempt's guest, started as asked where it can be, and the record of how. Each way of starting (a
    snapshot's build, its restore, a cold boot after it failed) has `boot_timeout_sec` of its own; the boot
    phase's deadline bounds them all."""

    def boot_cold(record: StartRecord) -> tuple[Guest, StartRecord]:
        guest = start_guest(spec, attempt, work_dir=work_dir, boot_timeout_sec=boot_timeout_sec, boot=boot,
                            progress_file=progress_file, save_dir=save_dir)
        return guest, record

    if asked == "cold":
        return boot_cold(StartRecord(asked=asked, got="cold"))
    refusal = spec.guest_kind.snapshot_refusal
    if refusal is not None:
        return boot_cold(StartRecord(asked=asked, got="cold", reason=refusal))
    cache = SnapshotCache(cache_dir)
    lookup = cache.ensure(spec, attempt, deadline=time.monotonic() + boot_timeout_sec)
    if lookup.entry is None:
        return boot_cold(StartRecord(asked=asked, got="cold", reason=lookup.reason))
    entry = lookup.entry
    name = f"{entry.config.name}/{entry.id}"
    restoring = BootRecord()
    try:
        guest = start_guest(spec, attempt, work_dir=work_dir, boot_timeout_sec=boot_timeout_sec, boot=restoring,
                            progress_file=progress_file, save_dir=save_dir, restore=entry.saved_desktop())
    except GuestError as exc:  # a deadline or a stop signal passes: the attempt ends as it would on any boot
        cache.restore_failed(entry, f"failed to restore: {exc}")
        return boot_cold(StartRecord(asked=asked, got="cold", reason=f"failed to restore: {exc}", snapshot=name,
                                     built_snapshot=lookup.built, failed_restore=restoring.readiness))
    cache.restored(entry.config)
    boot.readiness.extend(restoring.readiness)
    return guest, StartRecord(asked=asked, got="snapshot", snapshot=name, built_snapshot=lookup.built)
