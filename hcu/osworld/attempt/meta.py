"""meta.json: what an attempt ran on and what each phase saw, beside result.json (the outcome).

Filled phase by phase and written with the result whatever happened, so a failed attempt keeps where it stopped:
the guest's readiness steps and console, the setup steps and every guest answer, the checks before the agent.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from hcu.osworld.attempt.agent_phase import AgentOutcome
from hcu.osworld.attempt.gateway_health import GatewayHealth
from hcu.osworld.attempt.mcp_probe import ProbeReport
from hcu.osworld.evidence.collect import TrajectoryReport
from hcu.osworld.evidence.recording import RecordingReport
from hcu.osworld.guest.container_image import ContainerImage
from hcu.osworld.guest.ports import GuestPorts
from hcu.osworld.guest.readiness import ReadinessStep
from hcu.osworld.guest_state.kept import FinalDesktopRecord
from hcu.osworld.guest_state.start import StartRecord
from hcu.osworld.osworld_bridge.setup import SetupStepRecord
from hcu.record_io import Record


class GuestSpecRecord(BaseModel):
    """The guest asked for: the guest spec without the client password. Fields a newer guest spec adds are kept
    as they are, so one hcu reads another's meta.json."""

    model_config = ConfigDict(extra="allow")

    kind: str
    """qemu or test-desktop (a kind a newer hcu knows reads too)."""
    image: str
    """qcow2 path (qemu) or docker image reference (test-desktop)."""
    docker_image: str | None = None
    """The container image that boots `image` with QEMU."""
    volume_size_gb: int | None = None
    ram_size: str | None = None
    cpu_cores: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _never_the_password(cls, data: Any) -> Any:
        if isinstance(data, dict) and "client_password" in data:
            return {key: value for key, value in data.items() if key != "client_password"}
        return data


class GuestRecord(BaseModel):
    spec: GuestSpecRecord | None = None
    """The guest asked for (kind, image, sizes; never the client password)."""
    container_id: str | None = None
    host: str | None = None
    ports: GuestPorts | None = None
    container_image: ContainerImage | None = None
    """The image the container ran, pinned by digest or id."""
    readiness: list[ReadinessStep] = []
    """Each readiness step; when the boot failed, the last one is where it stopped."""
    console_log: str | None = None
    """The guest's log tail (the VM's serial console) kept when it never became ready."""
    start: StartRecord | None = None
    """How the guest started: restored from a snapshot or booted cold, and why cold when a snapshot was asked."""


class ArtifactRecord(BaseModel):
    """A file that ran in the guest: agents.json's record for a fetched CLI, else the file's own hash."""

    model_config = ConfigDict(extra="allow")

    path: str
    sha256: str
    version: str | None = None


class OSWorldRecord(BaseModel):
    """The OSWorld code that set the task up and scored it."""

    python: str | None = None
    """The OSWorld process's interpreter."""
    desktop_env: str | None = None
    """Its `desktop_env` package directory."""
    hcu: str | None = None
    """The hcu checkout the OSWorld process ran."""


class AttemptMeta(Record):
    schema_version: int = 2
    attempt_id: str
    task_sha256: str | None = None
    osworld: OSWorldRecord = OSWorldRecord()
    guest: GuestRecord | None = None
    setup_steps: list[SetupStepRecord] = []
    """Every setup step run, the failed one last, each with the guest's answers."""
    gateway: str | None = None
    scope: str | None = None
    """The attempt's gateway scope (`/t/<scope>/...`)."""
    session_id: str | None = None
    artifacts: dict[str, ArtifactRecord] = {}
    gateway_health: GatewayHealth | None = None
    """The gateway's /healthz as the guest read it before the agent started (this attempt's scope)."""
    agent_version: str | None = None
    mcp_probe: ProbeReport | None = None
    agent: AgentOutcome | None = None
    recording: RecordingReport | None = None
    """The screen recording around the agent phase (`record_video`): kept, or why not."""
    evidence_error: str | None = None
    """Why trajectory.json could not be written, when it could not."""
    trajectory: TrajectoryReport | None = None
    """Whether trajectory.json was written (and how many of its steps are the agent's), or why not."""
    final_desktop: FinalDesktopRecord | None = None
    """Whether the final desktop (saved after settle, before the evaluator) was kept, where and its size, or why
    not."""
