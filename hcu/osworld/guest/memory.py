"""Memory admission: a guest starts only when what it needs fits the host's memory, host-wide across runners.

What a guest needs is its kind's (kinds.GuestKind.memory_need: the official image's RAM_SIZE plus its overhead,
the test desktop's fixed footprint), with a margin on top (`hcu.defaults.GUEST`). A ledger
(`<state dir>/memory.json`, under its lock) holds one reservation per guest: its container name, pid, labels,
bytes, and whether it is still starting. A guest is admitted when both hold:
- the host's available memory, less what guests still starting have reserved, covers its need and the margin.
  This is what the official image checks at its start and again just before QEMU (else it exits 17): no guest
  hcu starts is refused for the memory of another guest hcu was starting;
- all reservations together, its own included, stay within the host's total memory less the margin: running
  guests grow into their RAM_SIZE, and hcu never promises more than the host has.
Once the guest's API answers, its VM runs and its memory shows in the available figure: from then on it counts
only in the second rule. Reservations are released when the guest is removed (or `cleanup` removes it); one
whose process is gone and whose container does not exist is stale and dropped.

Every runner on a host (one host's queue, or one Ray node's runners) goes through the same ledger, so the
admission is the same wherever the guest starts.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable

import docker
import docker.errors
from pydantic import BaseModel

from hcu.defaults import GUEST
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest.host import HostMemory, gib, read_memory, size_bytes
from hcu.osworld.guest.state_dir import drop_matching, locked_table, pid_alive

log = logging.getLogger(__name__)

LEDGER = "memory.json"
MARGIN = size_bytes(GUEST.memory_margin)


class Reservation(BaseModel):
    owner: str
    """The guest's container name."""
    pid: int
    labels: dict[str, str]
    bytes: int
    starting: bool = True
    """Until the guest's VM runs, its memory is not yet in the host's available figure."""


def shortfall(memory: HostMemory, need: int, others: Iterable[Reservation]) -> str | None:
    """Why a guest needing `need` bytes cannot start now beside the `others` (None: it can)."""
    others = list(others)
    starting = sum(r.bytes for r in others if r.starting)
    if memory.available - starting < need + MARGIN:
        held = f", {gib(starting)} of it reserved by guests still starting" if starting else ""
        return (f"needs {gib(need)} and {gib(MARGIN)} to spare; {gib(memory.available)} available{held}")
    reserved = sum(r.bytes for r in others)
    if reserved + need > memory.total - MARGIN:
        return (f"needs {gib(need)}; {len(others)} guests hold {gib(reserved)} of the host's "
                f"{gib(memory.total)} ({gib(MARGIN)} kept free)")
    return None


def admit(client: docker.DockerClient, need: int, owner: str, labels: dict[str, str], what: str,
          on_wait: Callable[[str], None]) -> str:
    """Reserve `need` bytes for `owner`, waiting (polling the host's memory) until they fit; `on_wait` hears,
    at every poll, why it waits. A stop signal or a phase deadline ends the wait like any other. Raises
    ConfigurationError when the guest could never fit this host (`what` names the setting that sized it).
    Returns what was measured, for the readiness record."""
    started, waited = time.monotonic(), False
    while True:
        memory = read_memory()
        if need + MARGIN > memory.total:
            raise ConfigurationError(f"{what}: the guest needs {gib(need)} and {gib(MARGIN)} to spare, more than "
                                     f"this host's {gib(memory.total)} of memory")
        with locked_table(LEDGER, Reservation) as ledger:
            _drop_stale(client, ledger)
            ledger.pop(owner, None)  # an earlier reservation of this guest (a restarted start) is replaced
            reason = shortfall(memory, need, ledger.values())
            if reason is None:
                ledger[owner] = Reservation(owner=owner, pid=os.getpid(), labels=labels, bytes=need)
                break
        if not waited:
            log.info("guest %s waits for memory: %s", owner, reason)
        waited = True
        on_wait(f"waiting for memory: {reason}")
        time.sleep(GUEST.memory_poll_sec)
    measured = f"needs {gib(need)}; {gib(memory.available)} available"
    if waited:
        measured += f"; waited {time.monotonic() - started:.0f} s for memory"
        log.info("guest %s admitted: %s", owner, measured)
    return measured


def _drop_stale(client: docker.DockerClient, ledger: dict[str, Reservation]) -> None:
    for owner in [o for o, r in ledger.items() if not pid_alive(r.pid)]:
        try:
            client.containers.get(owner)
        except docker.errors.NotFound:
            del ledger[owner]


def mark_running(owner: str) -> None:
    """The guest's VM runs: its memory is in the host's available figure now."""
    with locked_table(LEDGER, Reservation) as ledger:
        if owner in ledger:
            ledger[owner].starting = False


def release(owner: str) -> None:
    with locked_table(LEDGER, Reservation) as ledger:
        ledger.pop(owner, None)


def release_matching(labels: dict[str, str]) -> list[str]:
    """Release every reservation whose labels include all of `labels`; returns the owners released."""
    return drop_matching(LEDGER, Reservation, labels)
