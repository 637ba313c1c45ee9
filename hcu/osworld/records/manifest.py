"""manifest.json as a model: everything a run's number depends on that the config does not already say, and
where its attempts ran. The queue writes it (hcu/osworld/queue/manifest.py: built at each start, its pins checked
on resume); the viewer reads it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from hcu.defaults import RETRIES
from hcu.record_io import Record

REPEAT_POLICY = "mean"
"""How repeats make a task's score: the mean of its scored repeats, never the best of them."""
REPEAT_POLICY_TEXT = (f"{REPEAT_POLICY}: each task runs `repeats` times, every repeat scored with its own identity "
                      "and retries; a task's score is the mean of its repeats (never a best-of)")
"""The policy as manifest.json states it."""


class Found(BaseModel):
    """What the manifest found of one input: the keys it could fill, and `error` where it could not look. A key it
    did not fill stays out of manifest.json, and a key a newer hcu adds is kept."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _only_what_was_found(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if key in self.model_fields_set}


class FileIdentity(Found):
    """A file by path, size and sha256; `path` None when the run names none."""

    path: str | None
    size: int | None = None
    sha256: str | None = None
    error: str | None = None
    """"not a file" when nothing is at `path`."""


class ContainerImageIdentity(Found):
    """The test desktop's image as this host's engine has it."""

    container_image: str
    id: str | None = None
    repo_digests: list[str] | None = None
    error: str | None = None
    """The engine's exception when it could not say (the runner says more)."""


class DockerImageIdentity(Found):
    """The QEMU container image (`guest.container_image.ContainerImage`), or why it is not on this host yet."""

    reference: str
    id: str | None = None
    repo_digest: str | None = None
    error: str | None = None


class TaskIdentity(Found):
    """The task definition the runner loads, or why it did not load here."""

    path: str | None = None
    sha256: str | None = None
    error: str | None = None


class GitRevision(Found):
    """A checkout's HEAD; `error` for a folder that is not one."""

    path: str
    commit: str | None = None
    dirty: bool | None = None
    error: str | None = None


class OSWorldCode(Found):
    """The OSWorld code the runner uses: its checkout's revision and its interpreter, or why the manifest could
    not ask."""

    path: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    error: str | None = None
    python: str | None = None
    python_version: str | None = None
    desktop_env_version: str | None = None


class OSWorldRevision(Found):
    code: OSWorldCode
    tasks_dir: GitRevision | None
    """The tasks folder's revision, None when the run names none."""


class IndexedFile(Found):
    """A file of agents.json, as `make agents` recorded it (its keys sorted)."""

    sha256: str | None = None
    size: int | None = None
    version: str | None = None


class Artifacts(Found):
    """Every file an attempt uploads or delivers."""

    agents_json: dict[str, IndexedFile] | None
    """artifact_dir's agents.json (None without one)."""
    agent: dict[str, FileIdentity]
    """The agent's artifacts by name, the CLI's from agent_binary."""
    computer_use: FileIdentity
    instructions_file: FileIdentity
    base_instructions_file: FileIdentity


class GatewayAnswer(Found):
    """The gateway's /healthz at a start: its answer, the error that stopped the question, or that each Ray node
    starts its own."""

    url: str | None = None
    status: int | None = None
    body: dict[str, Any] | str | None = None
    """The answer as sent (JSON, else its first 500 characters)."""
    error: str | None = None
    per_node: str | None = None


class Start(BaseModel):
    """One start of the queue on this run."""

    at: float
    host: str
    hcu_commit: GitRevision
    gateway_health: GatewayAnswer


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
    task_files: dict[str, TaskIdentity]
    osworld_revision: OSWorldRevision
    guest_image: FileIdentity | ContainerImageIdentity
    """The qcow2 file (guest_image), or the test desktop's image."""
    artifacts: Artifacts
    guest_docker_image: DockerImageIdentity | None = None
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
        """What must not change under a run, as manifest.json states it."""
        pinned = self.model_dump(mode="json", include={"config_sha256", "task_files", "guest_image"})
        return {**pinned, "guest_docker_image": self.guest_docker_image.id if self.guest_docker_image else None}
