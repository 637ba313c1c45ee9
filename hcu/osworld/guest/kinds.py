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

The official image (`happysixd/osworld-docker`) and its local QEMU stand-in (`make qemu-guest`) are one kind:
the stand-in exists to run the official kind's code, so it has no class of its own. Adding a kind: its class
here, its entry in `KINDS`, the setting that asks for it (settings.GuestSettings); docs/contributing.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, Field

from hcu.defaults import BENCHMARKS, GUEST
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest import container_image, readiness
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.container_image import ContainerImage
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import KVM_DEVICE, boots_with_kvm, check_kvm, size_bytes
from hcu.osworld.guest.readiness import Readiness
from hcu.osworld.settings import SIZE, GuestSettings

KindName = Literal["qemu", "test-desktop"]


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


@dataclass(frozen=True)
class ContainerOptions:
    """What a kind adds to the container contract every guest shares (lifecycle.container_config)."""

    environment: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)


class GuestKind(Protocol):
    name: KindName

    def image_in(self, settings: GuestSettings) -> str | None:
        """The image `settings` ask for as this kind; None when they ask for another kind."""

    def container_image(self, spec: GuestSpec) -> str:
        """The container image the guest's container runs (not yet pinned)."""

    def check_host(self, container_image: str, client: docker.DockerClient | None = None) -> None:
        """Refuse, as a ConfigurationError, a host that cannot run this kind's guests in `container_image`
        (`client`: the engine to ask, default a client of its own when there is something to ask)."""

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec) -> ContainerImage:
        """The guest's container image, pinned, once everything no attempt could boot without is checked."""

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        """Bytes one guest asked for with `ram_size` takes, and the setting that sized it (for a guest that can
        never fit)."""

    def create_overlay(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path) -> Path | None:
        """The attempt's own disk over the guest's image (registered for cleanup first); None for none."""

    def container_options(self, spec: GuestSpec, overlay: Path | None) -> ContainerOptions:
        """The environment, mounts, devices and capabilities this kind adds to the shared container contract."""

    def last_steps(self, steps: Readiness, api: GuestAPI, spec: GuestSpec) -> None:
        """Readiness steps of this kind after the shared ones (the guest answers, paints and runs sudo)."""


class QemuGuest:
    """QEMU/KVM in a container booting a qcow2 through a per-attempt overlay: the official image, or any with
    its contract (the QEMU stand-in)."""

    name: KindName = "qemu"

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

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec) -> ContainerImage:
        overlays.check_image(Path(spec.image), spec.volume_size_gb)
        self.check_host(spec.docker_image, client)
        try:
            return container_image.resolve(client, spec.docker_image, pull=True)
        except docker.errors.ImageNotFound:
            raise ConfigurationError(f"guest_docker_image {spec.docker_image}: not found here nor in its registry "
                                     "(the QEMU stand-in: build it with `make qemu-guest`)") from None

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        return size_bytes(ram_size) + size_bytes(GUEST.memory_overhead), f"ram_size {ram_size}"

    def create_overlay(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path) -> Path | None:
        return overlays.create_overlay(Path(spec.image), work_dir / f"{name}.qcow2", name, labels)

    def container_options(self, spec: GuestSpec, overlay: Path | None) -> ContainerOptions:
        if overlay is None:
            raise ValueError("a qemu guest needs its overlay")
        base = str(Path(spec.image).resolve())
        # the overlay names its backing file by absolute host path: mount the image there, read-only; the
        # password is the one baked into the qcow2, so no CLIENT_PASSWORD
        return ContainerOptions(
            volumes={str(overlay): {"bind": "/System.qcow2", "mode": "rw"}, base: {"bind": base, "mode": "ro"}},
            devices=[f"{KVM_DEVICE}:{KVM_DEVICE}:rwm"], cap_add=["NET_ADMIN"])

    def last_steps(self, steps: Readiness, api: GuestAPI, spec: GuestSpec) -> None:
        with steps.step("filesystem grown") as note:
            note.detail = readiness.grow_filesystem(api, spec.client_password, spec.volume_size_gb)


class TestDesktopGuest:
    """The locally built test desktop: the same desktop and in-guest API as a plain container (fast)."""

    name: KindName = "test-desktop"

    def image_in(self, settings: GuestSettings) -> str | None:
        return settings.test_desktop_image

    def container_image(self, spec: GuestSpec) -> str:
        return spec.image

    def check_host(self, container_image: str, client: docker.DockerClient | None = None) -> None:
        """Any host with a Docker engine runs it."""

    def prepare_image(self, client: docker.DockerClient, spec: GuestSpec) -> ContainerImage:
        try:
            return container_image.resolve(client, spec.image, pull=False)
        except docker.errors.ImageNotFound:
            raise ConfigurationError(f"image {spec.image} not found: build it with `make test-desktop`") from None

    def memory_need(self, ram_size: str) -> tuple[int, str]:
        return size_bytes(GUEST.test_desktop_memory), "the test desktop"  # it ignores RAM_SIZE

    def create_overlay(self, spec: GuestSpec, name: str, labels: dict[str, str], work_dir: Path) -> Path | None:
        return None

    def container_options(self, spec: GuestSpec, overlay: Path | None) -> ContainerOptions:
        return ContainerOptions(environment={"CLIENT_PASSWORD": spec.client_password})  # sets its user's password

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
