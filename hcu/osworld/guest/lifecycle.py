"""Guest lifecycle: one container per attempt, gated on readiness, removed with everything it made.

Two kinds share one code path: the official OSWorld guest (`happysixd/osworld-docker`, or any image with its
contract such as the local QEMU stand-in: QEMU/KVM booting a per-attempt qcow2 overlay of the guest image) and the
locally built test desktop. A guest starts only when the host can run it: KVM for the official kind (host.py),
its memory for every kind (memory.py). Every resource is labelled with the attempt id, or registered under the
state dir before it is created, so `cleanup` finds it after a crash. Ports are published on the bridge address
only.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors
import requests
from pydantic import BaseModel, ConfigDict, Field

from hcu.defaults import BENCHMARKS, GUEST
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest import container_image, memory, readiness
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.console import ContainerWatch
from hcu.osworld.guest.container_image import ContainerImage
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import KVM_DEVICE, boots_with_kvm, check_kvm
from hcu.osworld.guest.ports import CONTAINER_PORTS, GuestPorts
from hcu.osworld.guest.progress import WaitNote
from hcu.osworld.guest.readiness import Readiness, ReadinessStep
from hcu.osworld.records import interrupts
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.settings import SIZE, GuestSettings

log = logging.getLogger(__name__)

STORAGE_MOUNT = "/storage"
"""The official image keeps its data disk here; a labelled named volume instead of an anonymous one."""
CONSOLE_TAIL_LINES = 300


class GuestSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["qemu", "test-desktop"]
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
    def container_image(self) -> str:
        return self.docker_image if self.kind == "qemu" else self.image

    @classmethod
    def for_settings(cls, settings: GuestSettings) -> GuestSpec:
        """The guest that resolved settings ask for (`AttemptSettings.resolved()` fills volume and password)."""
        assert settings.volume_size is not None and settings.client_password is not None, "resolve the settings"
        if settings.guest_image is not None:
            kind, image = "qemu", str(settings.guest_image)
        else:
            kind, image = "test-desktop", str(settings.test_desktop_image)
        return cls(kind=kind, image=image, docker_image=settings.guest_docker_image,
                   volume_size_gb=settings.volume_size, ram_size=settings.ram_size,
                   client_password=settings.client_password)


@dataclass
class Guest:
    """A running guest."""

    attempt: AttemptId
    spec: GuestSpec
    name: str
    container_id: str
    host: str
    ports: GuestPorts
    api: GuestAPI
    overlay: Path | None
    container_image: ContainerImage
    """The image the container runs, pinned by digest or id."""
    readiness: list[ReadinessStep] = field(default_factory=list)

    def api_url(self) -> str:
        return f"http://{self.host}:{self.ports.api}"


def container_name(attempt: AttemptId) -> str:
    raw = f"hcu-{attempt.run_id}-{attempt.task_key}-{attempt.attempt}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)[:200]


def volume_name(name: str) -> str:
    return f"{name}-storage"


def container_config(
    spec: GuestSpec, attempt: AttemptId, *, image: str, ports: GuestPorts, host: str, overlay: Path | None
) -> dict[str, Any]:
    """Keyword arguments for `containers.create` (from `image`, spec.container_image pinned): the container
    contract both guest kinds honour."""
    name = container_name(attempt)
    config: dict[str, Any] = {
        "image": image,
        "name": name,
        "labels": attempt.labels(),
        "detach": True,
        "environment": {
            "RAM_SIZE": spec.ram_size,
            "CPU_CORES": str(spec.cpu_cores),
            "DISK_SIZE": f"{spec.volume_size_gb}G",
        },
        "ports": {f"{CONTAINER_PORTS[key]}/tcp": (host, port) for key, port in ports.model_dump().items()},
        "volumes": {volume_name(name): {"bind": STORAGE_MOUNT, "mode": "rw"}},
    }
    if spec.kind == "test-desktop":  # it sets its user's password from it; the official image's is baked in
        config["environment"]["CLIENT_PASSWORD"] = spec.client_password
    if spec.kind == "qemu":
        if overlay is None:
            raise ValueError("a qemu guest needs its overlay")
        base = str(Path(spec.image).resolve())
        config["devices"] = [f"{KVM_DEVICE}:{KVM_DEVICE}:rwm"]
        config["cap_add"] = ["NET_ADMIN"]
        # the overlay names its backing file by absolute host path: mount the image there, read-only
        config["volumes"] |= {
            str(overlay): {"bind": "/System.qcow2", "mode": "rw"},
            base: {"bind": base, "mode": "ro"},
        }
    return config


def start_guest(
    spec: GuestSpec, attempt: AttemptId, *, work_dir: Path, boot_timeout_sec: float = GUEST.boot_timeout_sec,
    progress_file: Path | None = None,
) -> Guest:
    """Start the attempt's guest and return it once every readiness step passed.

    `work_dir` holds the guest's files (its overlay, the console of a failed boot), inside the attempt's result
    directory; `progress_file` is the attempt's progress.json (default: the one in that result directory), where
    a wait for memory shows. Raises GuestError naming the failed step (its `readiness` attribute holds the steps
    so far; GuestMemoryError when the image exited for lack of memory), ConfigurationError for what no attempt
    could boot; on any failure, including an interrupt, everything this call created is removed."""
    deadline = time.monotonic() + boot_timeout_sec
    name = container_name(attempt)
    steps = Readiness(name)
    client = docker_client()
    created = False
    try:
        with steps.step("image checked"):
            image = _check_prerequisites(client, spec)
        created = True
        with steps.step("memory admitted") as note:
            note.detail = _admit_memory(client, spec, attempt, progress_file or work_dir.parent / "progress.json")
        with steps.step("resources created"):
            _remove_resources(client, name, keep_memory=True)  # this attempt's leftovers, if a crashed run left any
            host = bridge_address(client)
            overlay = _create_overlay(spec, attempt, work_dir)
            with interrupts.held():  # each call has the client's timeout
                client.volumes.create(name=volume_name(name), labels=attempt.labels())
            with port_leases.publishing_lock():
                ports = port_leases.allocate(client, name, attempt.labels(), host)
                config = container_config(spec, attempt, image=image.pinned, ports=ports, host=host, overlay=overlay)
                with interrupts.held():  # each call has the client's timeout
                    container = client.containers.create(**config)
            container.start()
        api = GuestAPI(f"http://{host}:{ports.api}", secret=spec.client_password)
        _gate(steps, spec, ContainerWatch(container, name), api, deadline)
        return Guest(attempt, spec, name, container.id, host, ports, api, overlay, image, steps.steps)
    except BaseException as exc:
        exc.readiness = steps.steps  # type: ignore[attr-defined]
        if created:
            exc.console_log = _keep_console(client, name, work_dir)  # type: ignore[attr-defined]
            _remove_after_failure(client, name)
        raise
    finally:
        client.close()


def _admit_memory(client: docker.DockerClient, spec: GuestSpec, attempt: AttemptId, progress_file: Path) -> str:
    """Wait until the host has the guest's memory (memory.py), the wait shown in the attempt's progress."""
    need = memory.need_bytes(spec.kind, spec.ram_size)
    what = f"ram_size {spec.ram_size}" if spec.kind == "qemu" else "the test desktop"
    wait_note = WaitNote(progress_file)
    try:
        return memory.admit(client, need, container_name(attempt), attempt.labels(), what, wait_note)
    finally:
        wait_note(None)


def _keep_console(client: docker.DockerClient, name: str, work_dir: Path) -> str | None:
    """The tail of a guest's log (the VM's serial console, the test desktop's entrypoint) before its removal:
    what a boot that never became ready was doing. Returns the file's path, None when there is no log."""
    try:
        with interrupts.held():  # the client's timeout bounds the call
            tail = client.containers.get(name).logs(tail=CONSOLE_TAIL_LINES)
    except docker.errors.NotFound:  # the boot stopped before its container existed
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        log.warning("guest %s: its console could not be kept (%s)", name, exc)
        return None
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        path = work_dir / f"{name}.console.log"
        path.write_bytes(tail)
        return str(path)
    except OSError as exc:
        log.warning("guest %s: its console could not be kept (%s)", name, exc)
        return None


def _check_prerequisites(client: docker.DockerClient, spec: GuestSpec) -> ContainerImage:
    """The guest's container image, pinned (a missing QEMU image is pulled); refuses, as a ConfigurationError
    (never retried), what no attempt could boot: a bad guest image, or no KVM for an image that needs it."""
    if spec.kind == "qemu":
        overlays.check_image(Path(spec.image), spec.volume_size_gb)
        if boots_with_kvm(client, spec.container_image):  # asked before a pull: the official image does
            check_kvm()
    try:
        return container_image.resolve(client, spec.container_image, pull=spec.kind == "qemu")
    except docker.errors.ImageNotFound:
        raise ConfigurationError(f"image {spec.image} not found: build it with `make test-desktop`") from None


def _create_overlay(spec: GuestSpec, attempt: AttemptId, work_dir: Path) -> Path | None:
    if spec.kind != "qemu":
        return None
    name = container_name(attempt)
    return overlays.create_overlay(Path(spec.image), work_dir / f"{name}.qcow2", name, attempt.labels())


def _gate(steps: Readiness, spec: GuestSpec, watch: ContainerWatch, api: GuestAPI, deadline: float) -> None:
    with steps.step("container running"):
        readiness.wait_running(watch, deadline)
    with steps.step("api answers"):
        readiness.wait_api(api, watch, deadline)
    memory.mark_running(watch.name)  # its VM runs: its memory shows in what the host has available
    with steps.step("desktop painted"):
        readiness.wait_painted(api, watch, deadline)
    with steps.step("sudo works"):
        readiness.check_sudo(api, spec.client_password)
    if spec.kind == "qemu":
        with steps.step("filesystem grown") as note:
            note.detail = readiness.grow_filesystem(api, spec.client_password, spec.volume_size_gb)


def _remove_resources(client: docker.DockerClient, name: str, *, keep_memory: bool = False) -> None:
    """Container (with its anonymous volumes), storage volume, overlay, port lease, memory reservation: in that
    order, so the overlay is never deleted under a running QEMU, the ports stay leased until nothing publishes
    them and the memory stays reserved until the guest is gone."""
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(name).remove(v=True, force=True)
    with contextlib.suppress(docker.errors.NotFound):
        client.volumes.get(volume_name(name)).remove(force=True)
    overlays.remove_overlay(name)
    port_leases.release(name)
    if not keep_memory:
        memory.release(name)


def _remove_after_failure(client: docker.DockerClient, name: str) -> None:
    """Removal on the failure path must not hide the failure; what it leaves is labelled for `cleanup`."""
    try:
        _remove_resources(client, name)
    except Exception as exc:
        log.warning("guest %s: removal after a failed start failed (%s); run cleanup", name, exc)


def remove_guest(guest: Guest) -> None:
    """Remove the guest's container, volumes, overlay and port lease; safe to call twice."""
    client = docker_client()
    try:
        _remove_resources(client, guest.name)
    finally:
        client.close()
