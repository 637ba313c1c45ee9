"""Per-node caps on concurrent phases: on one node, at most N attempts in boot+setup, in agent, in evaluation.

Boots and evaluations come in bursts and load a host far more than running agents do (Mage-VL-Cowork admits
4 / 16 / 8 per host), so the number of guests a node runs and how many of them may be in each phase are
separate settings. A node's caps are its own (Ray node labels, `CAP_LABELS`); the executor hands them to every
runner it starts there through `HCU_NODE_ADMISSION`, and the runner's phase log enters each phase through
`PhaseAdmission.enter` before timing it, so phase timestamps show only admitted time.

A cap of N is N slot files in the node's lock directory; holding a slot is an exclusive flock on one of them,
kept until the attempt enters another group (or a phase of none: collect, cleanup) or its process ends. The
kernel drops a dead process's locks, even after kill -9, so a dead runner never holds a slot.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger("hcu.run_task")

Group = Literal["boot_setup", "agent", "evaluate"]
PHASE_GROUPS: dict[str, Group] = {"boot": "boot_setup", "isolate": "boot_setup", "upload": "boot_setup",
                                  "setup": "boot_setup", "probe": "boot_setup", "agent": "agent",
                                  "evaluate": "evaluate"}
"""boot+setup is everything from the guest's start to the agent's (the guest is being made ready)."""
CAP_LABELS: dict[Group, str] = {"boot_setup": "hcu/boot-setup-cap", "agent": "hcu/agent-cap",
                                "evaluate": "hcu/evaluate-cap"}
"""The Ray node labels that set a node's caps (`ray start --labels hcu/boot-setup-cap=4,...`); none: no cap."""
ADMISSION_ENV = "HCU_NODE_ADMISSION"
WAIT_POLL_SEC = 0.1


class NodeCaps(BaseModel):
    """At most this many attempts of one node in each group at once (None: no cap beyond the node's slots)."""

    model_config = ConfigDict(extra="forbid")

    boot_setup: int | None = Field(default=None, ge=1)
    agent: int | None = Field(default=None, ge=1)
    evaluate: int | None = Field(default=None, ge=1)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> NodeCaps:
        """The caps a node's labels set; ValueError naming the label when one is not a positive integer."""
        caps: dict[str, int] = {}
        for group, label in CAP_LABELS.items():
            value = labels.get(label)
            if value is None:
                continue
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"node label {label}={value!r}: expected a positive integer")
            caps[group] = int(value)
        return cls(**caps)


class AdmissionSettings(BaseModel):
    """What a runner needs to honour its node's caps: the node's lock directory and the caps."""

    model_config = ConfigDict(extra="forbid")

    lock_dir: Path
    caps: NodeCaps

    def env(self) -> dict[str, str]:
        return {ADMISSION_ENV: self.model_dump_json()}


class PhaseAdmission:
    """One runner's hold on its node's phase slots."""

    def __init__(self, settings: AdmissionSettings) -> None:
        self.settings = settings
        self.held: tuple[Group, int] | None = None
        settings.lock_dir.mkdir(parents=True, exist_ok=True)

    def enter(self, phase: str) -> None:
        """Called before `phase` starts: keep the slot of its group, or release it and wait for the next."""
        group = PHASE_GROUPS.get(phase)
        if self.held is not None and self.held[0] == group:
            return
        self.release()
        cap = getattr(self.settings.caps, group) if group else None
        if group is None or cap is None:
            return
        waited_from = time.monotonic()
        while (fd := self._try_slot(group, cap)) is None:
            time.sleep(WAIT_POLL_SEC)
        self.held = (group, fd)
        waited = time.monotonic() - waited_from
        if waited >= WAIT_POLL_SEC:
            log.info("admission: waited %.1fs for one of the node's %d %s slots", waited, cap, group)

    def release(self) -> None:
        if self.held is not None:
            os.close(self.held[1])  # closing the only descriptor drops the flock
            self.held = None

    def _try_slot(self, group: Group, cap: int) -> int | None:
        for index in range(cap):
            fd = os.open(self.settings.lock_dir / f"{group}.{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None


def admission_from_env() -> Callable[[str], None] | None:
    """The runner's phase hook when its executor set node caps (None: nothing is capped)."""
    raw = os.environ.get(ADMISSION_ENV)
    if not raw:
        return None
    return PhaseAdmission(AdmissionSettings.model_validate_json(raw)).enter
