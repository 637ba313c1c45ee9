"""A booting guest's container seen by its state and its log, so readiness fails fast and says why.

The official image says what went wrong in its log and its exit code (qemus/qemu lineage):
- 88: no usable KVM (/dev/kvm missing or not writable, or no vmx/svm flag): a `configuration` failure;
- 17: RAM_SIZE plus 500 MB exceeds the host's available memory (checked at its start and just before QEMU):
  `guest_memory`, which the queue answers by running fewer attempts at once;
- any other exit: a `guest` failure, its last error line quoted;
- "falling back to user-mode networking" (its NAT setup failed): the container runs on, but user-mode
  networking forwards no port 5000, so the API would never answer: a `guest` failure within seconds, the log
  line quoted, instead of a wait to the boot deadline.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from docker.models.containers import Container

from hcu.osworld.errors import ConfigurationError, GuestError, GuestMemoryError

KVM_EXIT = 88
MEMORY_EXIT = 17
NETWORK_FALLBACK = re.compile(r"falling back to (?:usermode|user-mode|slirp) networking", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
ERROR_LINE = re.compile(r"\berror\b", re.IGNORECASE)
SCAN_INTERVAL_SEC = 1.0
"""How often the log is read for the network fallback while readiness polls."""
TAIL_LINES = 300
LINE_CHARS = 300


def log_lines(raw: bytes) -> list[str]:
    """The log's non-empty lines without terminal colours."""
    text = ANSI.sub("", raw.decode(errors="replace"))
    return [line.strip() for line in text.splitlines() if line.strip()]


def last_error(lines: list[str]) -> str:
    """The last line saying "error" (the image's own words for why it stopped), else the last line."""
    errors = [line for line in lines if ERROR_LINE.search(line)]
    return ((errors or lines or [""])[-1])[:LINE_CHARS]


def exit_failure(name: str, code: int | None, lines: list[str]) -> Exception:
    """What a guest container that exited during its boot failed as, from its exit code and its log."""
    said = last_error(lines)
    if code == KVM_EXIT:
        return ConfigurationError(f"KVM: guest {name}: the image exited {KVM_EXIT}, it has no usable KVM on this "
                                  f"host: {said}")
    if code == MEMORY_EXIT:
        return GuestMemoryError(f"guest {name}: the image exited {MEMORY_EXIT}, RAM_SIZE does not fit the "
                                f"host's available memory: {said}")
    return RuntimeError(f"container exited (exit code {code})" + (f": {said}" if said else ""))


class ContainerWatch:
    """Checked on every readiness poll: raises as soon as the container exited or its log shows the network
    fallback. The log is read incrementally (from the last line seen), at most once per SCAN_INTERVAL_SEC."""

    def __init__(self, container: Container, name: str) -> None:
        self.container, self.name = container, name
        self._since: float | None = None
        self._next_scan = 0.0

    def check(self) -> None:
        self.container.reload()
        if self.container.status in ("exited", "dead"):
            code = self.container.attrs.get("State", {}).get("ExitCode")
            raise exit_failure(self.name, code, log_lines(self.container.logs(tail=TAIL_LINES)))
        if time.monotonic() >= self._next_scan:
            self._next_scan = time.monotonic() + SCAN_INTERVAL_SEC
            self._scan()

    def _scan(self) -> None:
        raw = self.container.logs(timestamps=True, **({"since": self._since} if self._since else {}))
        for line in log_lines(raw):
            stamp, _, said = line.partition(" ")
            self._since = max(self._since or 0.0, _seconds(stamp))
            if NETWORK_FALLBACK.search(said):
                raise GuestError(f"guest {self.name}: the image fell back to user-mode networking (its NAT setup "
                                 f"failed), which forwards no port 5000, so its API can never answer: "
                                 f"{said[:LINE_CHARS]}")


def _seconds(stamp: str) -> float:
    """Docker's RFC 3339 log timestamp (up to nanoseconds) as UNIX seconds; 0 for a line without one."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    try:
        moment = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
        return moment.timestamp() + float(f"0.{fraction or 0}")
    except ValueError:
        return 0.0
