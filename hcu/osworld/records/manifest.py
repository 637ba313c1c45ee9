"""manifest.json as a model: everything a run's number depends on that the config does not already say, and
where its attempts ran. The queue writes it (hcu/osworld/queue/manifest.py: built at each start, its pins checked
on resume); the viewer reads it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hcu.defaults import RETRIES
from hcu.record_io import Record

REPEAT_POLICY = "mean"
"""How repeats make a task's score: the mean of its scored repeats, never the best of them."""
REPEAT_POLICY_TEXT = (f"{REPEAT_POLICY}: each task runs `repeats` times, every repeat scored with its own identity "
                      "and retries; a task's score is the mean of its repeats (never a best-of)")
"""The policy as manifest.json states it."""


class Start(BaseModel):
    """One start of the queue on this run."""

    at: float
    host: str
    hcu_commit: dict[str, Any]
    gateway_health: dict[str, Any]


class NodeInfo(BaseModel):
    """A node that ran attempts of the run."""

    name: str
    """The Ray node's label hcu/node, else <address>-<node id prefix>; the hostname for the local executor."""
    host: str
    address: str | None = None
    ray_node_id: str | None = None
    slots: float | None = None
    """Guest slots the node advertised."""
    caps: dict[str, int | None] = {}
    """Its caps on concurrent boot+setup, agent and evaluation phases (None: no cap beyond its slots)."""


class Manifest(Record):
    run_id: str
    config_sha256: str
    """sha256 of the resolved config without the tunable keys (see RunConfig.comparable)."""
    task_files: dict[str, dict[str, Any]]
    osworld_revision: dict[str, Any]
    guest_image: dict[str, Any]
    artifacts: dict[str, Any]
    guest_docker_image: dict[str, Any] | None = None
    """The QEMU container image (`reference`, `id`, `repo_digest`); pinned from the first start that finds it on
    this host (a run may start before its first attempt pulls it). None for the test desktop."""
    retry_policy: str = RETRIES.policy
    repeat_policy: str = REPEAT_POLICY_TEXT
    starts: list[Start] = []
    nodes: dict[str, NodeInfo] = {}
    """Every node that ran an attempt of this run, by name."""
    attempt_nodes: dict[str, str] = {}
    """Attempt id (run/task/attempt) -> the name of the node it ran on."""

    def pins(self) -> dict[str, Any]:
        return {"config_sha256": self.config_sha256, "task_files": self.task_files,
                "guest_image": self.guest_image, "guest_docker_image": (self.guest_docker_image or {}).get("id")}
