"""Guest kinds: what differs between the guests hcu starts, each kind one class behind `GuestKind`.

`lifecycle.start_guest` runs the same steps for every guest; where kinds differ it asks the guest's kind, chosen
once: from the settings by `kind_for` (the setting that names an image: `guest_image` or `test_desktop`), then
carried by `GuestSpec.kind` into meta.json.

| | QemuGuest ("qemu") | TestDesktopGuest ("test-desktop") |
|---|---|---|
| asked for by | `guest_image` (a qcow2) | `test_desktop` (an image reference) |
| container image | `guest_docker_image`, pulled when absent | the test desktop itself, never pulled |
| before the start | the qcow2 checked; KVM unless the image boots with TCG | nothing |
| memory | RAM_SIZE plus the image's overhead | a fixed footprint |
| disk | a per-attempt qcow2 overlay at /System.qcow2 over the read-only image | none |
| devices | /dev/kvm, NET_ADMIN | none |
| password | baked into the qcow2 (client_password must match it) | `CLIENT_PASSWORD` sets it |
| last readiness step | the root filesystem grown into volume_size | none |
| a saved desktop | the whole machine: memory, devices and disk (machine_state.py) | its files: a committed image |
| starts from a snapshot | yes (a restored machine) | no: it has no machine state to save |

The official image (`happysixd/osworld-docker`) and its local QEMU stand-in (`make qemu-guest`) are one kind:
the stand-in exists to run the official kind's code, so it has no class of its own. Adding a kind: its class
here, its entry in `KINDS`, the setting that asks for it (settings.GuestSettings); docs/contributing.md.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, Field

from hcu.defaults import BENCHMARKS, GUEST
from hcu.osworld.errors import ConfigurationError, GuestError
from hcu.osworld.guest import container_image, machine_state, readiness
from hcu.osworld.guest import control as controls
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.container_image import ContainerImage
from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.guest.host import KVM_DEVICE, boots_with_kvm, check_kvm, size_bytes
from hcu.osworld.guest.machine_state import SavedMachine
from hcu.osworld.guest.monitor import Monitor, socket_in
from hcu.osworld.guest.readiness import Readiness
from hcu.osworld.settings import SIZE, GuestSettings

KindName = Literal["qemu", "test-desktop"]
KEPT_IMAGE_REPOSITORY = "hcu-kept-desktop"
"""Where a test desktop's saved desktops are tagged (one tag per attempt)."""
MONITOR_WAIT_SEC = 60.0
"""How long after its container runs a QEMU guest's monitor socket may take to appear."""


class GuestSpec(BaseModel):
    """The guest one attempt runs on, as meta.json records it (without the password)."""

    model_config = ConfigDict(extra="forbid")

    kind: KindName
    image: str = Field(min_length=1)
    """qcow2 path (qemu) or docker image reference (test-desktop)."""
    docker_image: str = GUEST.qemu_docker_image
    """The container image that boots `image` with QEMU, for kind=qemu (the official one, or a stand-in with its
    contract)."""
    volume_size_gb: int = Field(default=BENCHMARKS["v1"].volume_size, ge=1)
    ram_size: str = Field(default=GUEST.ram_size, pattern=SIZE)
    cpu_cores: int = Field(default=GUEST.cpu_cores, ge=1)
    client_password: str = BENCHMARKS["v1"].client_password

    def __repr_args__(self) -> Any:  # keep the sudo password out of reprs and logs
        return [(k, "***" if k == "client_password" else v) for k, v in super().__repr_args__()]

    @property
    def guest_kind(self) -> GuestKind:
        return KINDS[self.kind]

    @property
    def container_image(self) -> str:
        return self.guest_kind.container_image(self)

    @classmethod
    def for_settings(cls, settings: GuestSettings) -> GuestSpec:
        """The guest that resolved settings ask for (`AttemptSettings.resolved()` fills volume and password)."""
        assert settings.volume_size is not None and settings.client_password is not None, "resolve the settings"
        kind = kind_for(settings)
        return cls(kind=kind.name, image=str(kind.image_in(settings)), docker_image=settings.guest_docker_image,
                   volume_size_gb=settings.volume_size, ram_size=settings.ram_size,
                   client_password=settings.client_password)


class SavedDesktop(BaseModel):
    """A guest's desktop saved at one moment, from which a new guest starts where it stood."""

    model_config = ConfigDict(extra="forbid")

    kind: KindName
    machine: SavedMachine | None = None
    """qemu: the whole machine (memory, devices, disk)."""
    image: str | None = None
    """test-desktop: its files, as a container image committed from it (image id)."""
    holds: list[str]
    """What a guest started from it has as it was: memory, devices, disk; or files only."""
    lacks: list[str] = []
    """What it does not hold (a test desktop's running applications and memory)."""
    bytes: int
    """Its size on disk."""
    seconds: float
    """How long the guest was held to save it."""


@dataclass(frozen=True)
class GuestFiles:
    """The host files and folders one guest's container is given, made by lifecycle before it is created."""

    overlay: Path | None = None
    """The attempt's own disk (qemu)."""
    control_dir: Path | None = None
    """Where QEMU opens its monitor (qemu)."""
    save_dir: Path | None = None
    """Where a save of the machine writes (qemu; None: this guest is never saved)."""
    restore: SavedDesktop | None = None
    """What the guest starts from instead of booting its image."""


class RunningGuest(Protocol):
    """What a kind reads of a running guest to save it (lifecycle.Guest is one)."""

    name: str
    container_id: str
    spec: GuestSpec
    files: GuestFiles
    container_image: ContainerImage


@dataclass(frozen=True)
class ContainerOptions:
    """What a kind adds to the container contract every guest shares (lifecycle.container_config)."""

    environment: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)


class GuestKind(Protocol):
    name: KindName
    snapshot_refusal: str | None
    """Why a guest of this kind cannot start from a saved machine (None: it can)."""

    def image_in(self, settings: GuestSettings) -> str | None:
        """The image `settings` ask for as this kind; None when they ask for another kind."""

    def container_image(self, spec: GuestSpec) -> str:
        """The container image the guest's container runs (not yet pinned)."""

    def check_host(self, container_image: str, client: docker.DockerClient | None = None) -> None:
        """Refuse, as a ConfigurationError, a host that cannot run this kind's guests in `container_image`
        (`client`: the engine to ask, default a client of its own when there is something to ask)."""

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec,
                      restore: SavedDesktop | None = None) -> ContainerImage:
        """The guest's container image, pinned, once everything no attempt could boot without is checked (from
        `restore`, the image that starts from it)."""

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        """Bytes one guest asked for with `ram_size` takes, and the setting that sized it (for a guest that can
        never fit)."""

    def create_files(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path, *,
                     restore: SavedDesktop | None, save_dir: Path | None) -> GuestFiles:
        """The attempt's own disk over the guest's image (or over `restore`'s) and its other host files, each
        registered for cleanup before it exists."""

    def container_options(self, spec: GuestSpec, files: GuestFiles) -> ContainerOptions:
        """The environment, mounts, devices and capabilities this kind adds to the shared container contract."""

    def resume(self, steps: Readiness, files: GuestFiles, deadline: float) -> None:
        """Once its container runs: a guest started from a saved desktop takes up its state (nothing to do for a
        kind whose saved desktop is its image)."""

    def last_steps(self, steps: Readiness, api: GuestAPI, spec: GuestSpec) -> None:
        """Readiness steps of this kind after the shared ones (the guest answers, paints and runs sudo)."""

    def save_desktop(self, guest: RunningGuest, labels: dict[str, str], *, timeout_sec: float) -> SavedDesktop:
        """Save the running guest's desktop (into its files' save_dir, or as an image labelled `labels`); the
        guest goes on running as it was."""

    def save_machine(self, guest: RunningGuest, *, timeout_sec: float,
                     then: Literal["continue", "quit"]) -> SavedMachine:
        """Save the running guest's whole machine into its files' save_dir, then continue or end it (GuestError
        for a kind that has no machine state: `snapshot_refusal` says why)."""


class QemuGuest:
    """QEMU/KVM in a container booting a qcow2 through a per-attempt overlay: the official image, or any with
    its contract (the QEMU stand-in)."""

    name: KindName = "qemu"
    snapshot_refusal: str | None = None

    def image_in(self, settings: GuestSettings) -> str | None:
        return None if settings.guest_image is None else str(settings.guest_image)

    def container_image(self, spec: GuestSpec) -> str:
        return spec.docker_image

    def check_host(self, container_image: str, client: docker.DockerClient | None = None) -> None:
        with contextlib.ExitStack() as stack:
            if client is None:
                client = stack.enter_context(contextlib.closing(docker_client()))
            if boots_with_kvm(client, container_image):  # asked before a pull: the official image does
                check_kvm()

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec,
                      restore: SavedDesktop | None = None) -> ContainerImage:
        overlays.check_image(Path(spec.image), spec.volume_size_gb)
        self.check_host(spec.docker_image, client)
        try:
            return container_image.resolve(client, spec.docker_image, pull=True)
        except docker.errors.ImageNotFound:
            raise ConfigurationError(f"guest_docker_image {spec.docker_image}: not found here nor in its registry "
                                     "(the QEMU stand-in: build it with `make qemu-guest`)") from None

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        return size_bytes(ram_size) + size_bytes(GUEST.memory_overhead), f"ram_size {ram_size}"

    def create_files(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path, *,
                     restore: SavedDesktop | None, save_dir: Path | None) -> GuestFiles:
        saved = restore.machine if restore is not None else None
        overlay = overlays.create_overlay(saved.disk if saved else Path(spec.image), work_dir / f"{name}.qcow2",
                                          name, labels, own_link=saved is not None)
        return GuestFiles(overlay=overlay, control_dir=controls.create(name, labels), save_dir=save_dir,
                          restore=restore)

    def container_options(self, spec: GuestSpec, files: GuestFiles) -> ContainerOptions:
        if files.overlay is None or files.control_dir is None:
            raise ValueError("a qemu guest needs its overlay and its control folder")
        # the overlay names the images under it by absolute host path: mount each there, read-only; the
        # password is the one baked into the qcow2, so no CLIENT_PASSWORD
        volumes = {str(files.overlay): {"bind": machine_state.BOOT_DISK, "mode": "rw"},
                   str(files.control_dir): {"bind": controls.CONTAINER_PATH, "mode": "rw"}}
        volumes.update({str(path): {"bind": str(path), "mode": "ro"} for path in overlays.backing_chain(files.overlay)})
        # QEMU's monitor on the control folder's socket, as extra QEMU parameters (qemus/qemu's ARGUMENTS)
        arguments = f"-qmp unix:{controls.CONTAINER_PATH}/{socket_in(Path()).name},server=on,wait=off"
        if files.save_dir is not None:
            volumes[str(files.save_dir)] = {"bind": machine_state.SAVE_PATH, "mode": "rw"}
        if files.restore is not None and files.restore.machine is not None:
            volumes[str(files.restore.machine.state_file.parent)] = {"bind": machine_state.RESTORE_PATH, "mode": "ro"}
            arguments += " -incoming defer"
        return ContainerOptions(environment={"ARGUMENTS": arguments}, volumes=volumes,
                                devices=[f"{KVM_DEVICE}:{KVM_DEVICE}:rwm"], cap_add=["NET_ADMIN"])

    def resume(self, steps: Readiness, files: GuestFiles, deadline: float) -> None:
        if files.restore is None:
            return
        assert files.control_dir is not None
        with steps.step("state restored") as note, self.monitor(files, deadline) as monitor:
            machine_state.restore(monitor, timeout_sec=max(deadline - time.monotonic(), 1.0))
            note.detail = f"QEMU {monitor.version}"

    def monitor(self, files: GuestFiles, deadline: float) -> Monitor:
        assert files.control_dir is not None
        within = min(MONITOR_WAIT_SEC, max(deadline - time.monotonic(), 1.0))
        return Monitor.connect(socket_in(files.control_dir), within_sec=within)

    def save_desktop(self, guest: RunningGuest, labels: dict[str, str], *, timeout_sec: float) -> SavedDesktop:
        machine = self.save_machine(guest, timeout_sec=timeout_sec, then="continue")
        return SavedDesktop(kind=self.name, machine=machine, holds=["memory", "devices", "disk"],
                            bytes=machine.bytes, seconds=machine.seconds)

    def save_machine(self, guest: RunningGuest, *, timeout_sec: float,
                     then: Literal["continue", "quit"]) -> SavedMachine:
        files = guest.files
        if files.save_dir is None or files.overlay is None:
            raise ValueError("this guest was started without a folder to save into")
        below = overlays.backing_chain(files.overlay)[0]
        if below != Path(guest.spec.image).resolve():  # a saved disk: kept with the save, which stands on it
            overlays.link_or_copy(below, files.save_dir / machine_state.BELOW_FILE)
            below = files.save_dir / machine_state.BELOW_FILE
        with self.monitor(files, time.monotonic() + timeout_sec) as monitor:
            return machine_state.save(monitor, files.save_dir, below, then=then, timeout_sec=timeout_sec)

    def last_steps(self, steps: Readiness, api: GuestAPI, spec: GuestSpec) -> None:
        with steps.step("filesystem grown") as note:
            note.detail = readiness.grow_filesystem(api, spec.client_password, spec.volume_size_gb)


class TestDesktopGuest:
    """The locally built test desktop: the same desktop and in-guest API as a plain container (fast)."""

    name: KindName = "test-desktop"
    snapshot_refusal: str | None = "the test desktop is a container: it has no machine state to save and restore"

    def image_in(self, settings: GuestSettings) -> str | None:
        return settings.test_desktop_image

    def container_image(self, spec: GuestSpec) -> str:
        return spec.image

    def check_host(self, container_image: str, client: docker.DockerClient | None = None) -> None:
        """Any host with a Docker engine runs it."""

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec,
                      restore: SavedDesktop | None = None) -> ContainerImage:
        image = restore.image if restore is not None and restore.image else spec.image
        try:
            return container_image.resolve(client, image, pull=False)
        except docker.errors.ImageNotFound:
            if restore is not None:
                raise ConfigurationError(f"kept desktop image {image}: no longer on this host") from None
            raise ConfigurationError(f"image {image} not found: build it with `make test-desktop`") from None

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        return size_bytes(GUEST.test_desktop_memory), "the test desktop"  # it ignores RAM_SIZE

    def create_files(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path, *,
                     restore: SavedDesktop | None, save_dir: Path | None) -> GuestFiles:
        return GuestFiles(restore=restore)

    def container_options(self, spec: GuestSpec, files: GuestFiles) -> ContainerOptions:
        return ContainerOptions(environment={"CLIENT_PASSWORD": spec.client_password})  # sets its user's password

    def resume(self, steps: Readiness, files: GuestFiles, deadline: float) -> None:
        """Its saved desktop is the image it runs: nothing to take up."""

    def save_machine(self, guest: RunningGuest, *, timeout_sec: float,
                     then: Literal["continue", "quit"]) -> SavedMachine:
        raise GuestError(self.snapshot_refusal or "")

    def save_desktop(self, guest: RunningGuest, labels: dict[str, str], *, timeout_sec: float) -> SavedDesktop:
        started = time.monotonic()
        with engine_calls(f"saving guest {guest.name}"), contextlib.closing(docker_client(timeout_sec)) as client:
            # paused while it is written; tagged, so that pruning dangling images never takes it
            image = client.containers.get(guest.container_id).commit(
                repository=KEPT_IMAGE_REPOSITORY, tag=guest.name[-128:], conf={"Labels": labels})
            size = image.attrs.get("Size", 0) - client.images.get(guest.container_image.id).attrs.get("Size", 0)
        return SavedDesktop(kind=self.name, image=image.id, holds=["files"],
                            lacks=["memory", "running applications", "open windows"], bytes=max(size, 0),
                            seconds=round(time.monotonic() - started, 3))

    def last_steps(self, steps: Readiness, api: GuestAPI, spec: GuestSpec) -> None:
        """Its filesystem is the container's: nothing to grow."""


KINDS: dict[KindName, GuestKind] = {kind.name: kind for kind in (QemuGuest(), TestDesktopGuest())}
"""Every guest kind by the name GuestSpec records."""


def kind_for(settings: GuestSettings) -> GuestKind:
    """The one kind `settings` ask for (GuestSettings accepts exactly one guest setting)."""
    (kind,) = [kind for kind in KINDS.values() if kind.image_in(settings) is not None]
    return kind


def check_host(settings: GuestSettings) -> None:
    """Before a queue launches anything on this host (or a Ray node runs an attempt): refuse, in one line, a host
    that cannot run the settings' guests (the official guest needs KVM here, unless its image boots with TCG)."""
    kind_for(settings).check_host(settings.guest_docker_image)
