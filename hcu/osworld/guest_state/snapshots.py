"""This host's cache of ready-to-run guest snapshots: a QEMU guest of one configuration booted once to ready (the
same readiness steps as any boot, its filesystem grown to volume_size), paused and saved; every later attempt of
that configuration restores it in seconds on an overlay of its own (kinds.QemuGuest).

Layout of the cache (default `<state dir>/snapshots`, the `snapshot_cache` setting moves it):

    qemu-<config>/            a complete snapshot: entry.json (written last), state.zst, disk.qcow2, all read-only
    qemu-<config>.partial/    one being built, under qemu-<config>.lock (a killed build leaves it to the next)
    qemu-<config>.failures.json   why its last builds or restores failed
    qemu-<config>.console.log     the console of its last build that did not come up

`<config>` is a digest of what names a configuration (base image path, runner image reference, RAM, cores,
volume size); entry.json records what makes the snapshot valid for it (the base image's sha256, the runner image
id, QEMU's version), and a snapshot whose record no longer matches is stale. A snapshot that is torn, stale or
fails to restore is never used: attempts boot cold, and the next one rebuilds it, once: after MAX_FAILURES
failures in a row (builds or restores) nothing is rebuilt until a restore succeeds or the failures file goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import orjson
from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict

from hcu.defaults import GUEST_STATE
from hcu.osworld.errors import GuestError
from hcu.osworld.guest import container_image
from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.guest.kinds import GuestSpec, SavedDesktop
from hcu.osworld.guest.lifecycle import BootRecord, remove_guest, start_guest
from hcu.osworld.guest.machine_state import DISK_FILE, STATE_FILE, SavedMachine
from hcu.osworld.guest.readiness import ReadinessStep
from hcu.osworld.guest.state_dir import state_dir
from hcu.osworld.records.identity import AttemptId
from hcu.record_io import Record, file_sha256, read_record, write_json, write_record

FORMAT = 1
"""Changes when what a snapshot holds, or how it is restored, changes: every older snapshot is then missing."""
BUILD_LABELS_FILE = "labels.json"
"""In a build's partial folder: its warm-up guest's labels."""
ENTRY_FILE = "entry.json"
MAX_FAILURES = 2
"""A snapshot is built at first use and rebuilt once after a failure; then attempts boot cold until one restores."""
GIB = 1 << 30


class SnapshotConfig(BaseModel):
    """What names a guest configuration, known before any file is read."""

    model_config = ConfigDict(frozen=True)

    base_image: str
    runner_image: str
    ram_size: str
    cpu_cores: int
    volume_size_gb: int
    format: int = FORMAT

    @classmethod
    def of(cls, spec: GuestSpec) -> SnapshotConfig:
        return cls(base_image=str(Path(spec.image).resolve()), runner_image=spec.docker_image,
                   ram_size=spec.ram_size, cpu_cores=spec.cpu_cores, volume_size_gb=spec.volume_size_gb)

    @property
    def name(self) -> str:
        digest = hashlib.sha256(orjson.dumps(self.model_dump(), option=orjson.OPT_SORT_KEYS)).hexdigest()
        return f"qemu-{digest[:16]}"


class SnapshotEntry(Record):
    """entry.json: one complete snapshot and what it is valid for."""

    id: str
    """This build's identity (a rebuild is another snapshot)."""
    config: SnapshotConfig
    base_sha256: str
    runner_image_id: str
    machine: SavedMachine
    """The saved machine: its state and its disk over the base image (`machine.backing`)."""
    state_bytes: int
    disk_bytes: int
    built_at: float
    boot_sec: float
    """The warm-up's cold boot, start to ready: what each start from this snapshot saves."""
    readiness: list[ReadinessStep]
    """The warm-up's readiness steps (the filesystem grown among them)."""

    def saved_desktop(self) -> SavedDesktop:
        return SavedDesktop(kind="qemu", machine=self.machine, holds=["memory", "devices", "disk"],
                            bytes=self.machine.bytes, seconds=self.machine.seconds)


@dataclass(frozen=True)
class Lookup:
    """A usable snapshot, or why there is none."""

    entry: SnapshotEntry | None
    reason: str | None = None
    built: bool = False
    """This call built it (its caller's boot took the warm-up's time)."""


class SnapshotCache:
    """The cache in one folder; every change to a configuration's files happens under its lock."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or state_dir() / GUEST_STATE.snapshot_dir
        self.folder.mkdir(parents=True, exist_ok=True)

    def _lock(self, config: SnapshotConfig, timeout_sec: float) -> FileLock:
        """The configuration's lock, waited for up to `timeout_sec` (inf: as long as it takes)."""
        return FileLock(str(self.folder / f"{config.name}.lock"),
                        timeout=-1 if math.isinf(timeout_sec) else max(timeout_sec, 0.0))

    def _failures_path(self, config: SnapshotConfig) -> Path:
        return self.folder / f"{config.name}.failures.json"

    def failures(self, config: SnapshotConfig) -> list[str]:
        path = self._failures_path(config)
        return list(orjson.loads(path.read_bytes())) if path.exists() else []

    def current(self, config: SnapshotConfig) -> tuple[SnapshotEntry | None, str]:
        """The complete, valid snapshot of `config`, or None and why not (missing, torn, stale)."""
        folder = self.folder / config.name
        if not (folder / ENTRY_FILE).exists():
            return None, "missing"
        try:
            entry = read_record(folder / ENTRY_FILE, SnapshotEntry)
        except (OSError, ValueError) as exc:
            return None, f"torn: its entry.json does not read ({exc})"
        for path, size in ((entry.machine.state_file, entry.state_bytes), (entry.machine.disk, entry.disk_bytes)):
            if not path.is_file() or path.stat().st_size != size:
                return None, f"torn: {path.name} is missing or not the size it was saved with"
        base = Path(config.base_image)
        if not base.is_file() or image_sha256(base) != entry.base_sha256:
            return None, f"stale: the base image {base} changed since the snapshot was saved"
        runner = _runner_image_id(config.runner_image)
        if runner != entry.runner_image_id:
            return None, f"stale: the runner image {config.runner_image} is now {runner}, not {entry.runner_image_id}"
        return entry, ""

    def ensure(self, spec: GuestSpec, attempt: AttemptId, *, deadline: float) -> Lookup:
        """The snapshot of `spec`'s configuration: the cached one, or one built now (waiting for another process's
        build of it first); None with the reason when there is none and none may be built."""
        config = SnapshotConfig.of(spec)
        entry, problem = self.current(config)
        if entry is not None:
            return Lookup(entry)
        try:
            with self._lock(config, deadline - time.monotonic()):
                entry, problem = self.current(config)  # another process may have built it meanwhile
                if entry is not None:
                    return Lookup(entry)
                failures = self.failures(config)
                if len(failures) >= MAX_FAILURES:
                    return Lookup(None, f"{problem}; not rebuilt after {len(failures)} failures (last: {failures[-1]})")
                try:
                    return Lookup(self._build(spec, config, attempt, deadline), built=True)
                except GuestError as exc:
                    self._fail(config, f"building it failed: {exc}")
                    return Lookup(None, f"{problem}; building it failed: {exc}")
        except Timeout:
            return Lookup(None, f"{problem}; another process was still building it at the boot's deadline")

    def restore_failed(self, entry: SnapshotEntry, reason: str) -> None:
        """A restore of `entry` failed: it is never used again (the next attempt rebuilds it, once)."""
        with self._lock(entry.config, GUEST_STATE.save_timeout_sec):
            current = self.folder / entry.config.name
            with contextlib.suppress(OSError, ValueError):
                if read_record(current / ENTRY_FILE, SnapshotEntry).id == entry.id:  # not one rebuilt meanwhile
                    _remove_tree(current)
                    self._fail(entry.config, reason)

    def restored(self, config: SnapshotConfig) -> None:
        """A restore succeeded: earlier failures no longer hold back a rebuild."""
        self._failures_path(config).unlink(missing_ok=True)

    def _fail(self, config: SnapshotConfig, reason: str) -> None:
        write_json(self._failures_path(config), [*self.failures(config), reason[:500]])

    def _build(self, spec: GuestSpec, config: SnapshotConfig, attempt: AttemptId, deadline: float) -> SnapshotEntry:
        """Boot the base image to ready, save the paused machine, and move the files into place (the caller holds
        the configuration's lock)."""
        final, partial = self.folder / config.name, self.folder / f"{config.name}.partial"
        _remove_tree(partial)  # a killed build's leftovers
        _remove_tree(final)  # torn or stale: never used again
        free = shutil.disk_usage(self.folder).free
        if free < GUEST_STATE.min_free_disk_gb * GIB:
            raise GuestError(f"only {free / GIB:.1f} GiB free in {self.folder}")
        partial.mkdir()
        warm_up = AttemptId(run_id=attempt.run_id, task_id=f"snapshot-{config.name}", attempt=1)
        write_json(partial / BUILD_LABELS_FILE, warm_up.labels())  # whose build it is: cleanup's filters match it
        started = time.monotonic()
        boot = BootRecord()
        try:
            guest = start_guest(spec, warm_up, work_dir=partial / "boot", boot_timeout_sec=deadline - started,
                                save_dir=partial, boot=boot)
        except GuestError as exc:  # the warm-up's console outlives the partial folder: why it did not come up
            kept, copied = self.folder / f"{config.name}.console.log", False
            if boot.console_log is not None:
                with contextlib.suppress(OSError):  # no room for it: the boot's own error is the one to report
                    shutil.copyfile(boot.console_log, kept)
                    copied = True
            if not copied:
                raise
            raise GuestError(f"{exc} (its console: {kept})") from exc
        try:
            boot_sec = round(time.monotonic() - started, 3)
            machine = spec.guest_kind.save_machine(guest, timeout_sec=GUEST_STATE.save_timeout_sec, then="quit")
        finally:
            remove_guest(guest)
        shutil.rmtree(partial / "boot", ignore_errors=True)
        moved = machine.model_copy(update={"state_file": final / STATE_FILE, "disk": final / DISK_FILE})
        for path in (partial / STATE_FILE, partial / DISK_FILE):
            path.chmod(0o444)  # never written again: every guest opens them read-only
        entry = SnapshotEntry(
            id=uuid.uuid4().hex, config=config,
            base_sha256=image_sha256(Path(config.base_image)),
            runner_image_id=guest.container_image.id, machine=moved,
            state_bytes=(partial / STATE_FILE).stat().st_size, disk_bytes=(partial / DISK_FILE).stat().st_size,
            built_at=time.time(), boot_sec=boot_sec, readiness=guest.readiness)
        write_record(partial / ENTRY_FILE, entry)
        os.rename(partial, final)
        (self.folder / f"{config.name}.console.log").unlink(missing_ok=True)
        return entry

    def remove_leftovers(self, labels: dict[str, str]) -> list[Path]:
        """Folders of builds that were killed (no process holds their lock) whose warm-up's labels include all of
        `labels`: what `cleanup` removes here."""
        removed = []
        for partial in sorted(self.folder.glob("*.partial")):
            with contextlib.suppress(OSError, ValueError):
                if not labels.items() <= orjson.loads((partial / BUILD_LABELS_FILE).read_bytes()).items():
                    continue
            config_name = partial.name.removesuffix(".partial")
            with contextlib.suppress(Timeout), FileLock(str(self.folder / f"{config_name}.lock"), timeout=0):
                _remove_tree(partial)
                removed.append(partial)
        return removed


def image_sha256(image: Path) -> str:
    """A guest image's sha256, hashed once per host for each (path, size, mtime)."""
    return file_sha256(image, state_dir() / "sha256-cache.json")


def _runner_image_id(reference: str) -> str:
    with engine_calls(f"runner image {reference}"), contextlib.closing(docker_client()) as client:
        try:
            return container_image.resolve(client, reference, pull=False).id
        except docker.errors.ImageNotFound:
            return "absent"


def _remove_tree(path: Path) -> None:
    if path.exists():
        for child in path.rglob("*"):
            with contextlib.suppress(OSError):
                child.chmod(0o644 if child.is_file() else 0o755)
        shutil.rmtree(path, ignore_errors=True)
