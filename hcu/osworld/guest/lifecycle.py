"""Guest lifecycle: one container per attempt, gated on readiness, removed with everything it made.

Every kind of guest (kinds.py: the official OSWorld guest and images with its contract such as the local QEMU
stand-in, or the locally built test desktop) goes through the same steps; where kinds differ, the guest's kind
answers. A guest starts only when the host can run it: its kind's prerequisites (a qcow2, KVM) and its memory
(memory.py). Every resource is labelled with the attempt id, or registered under the state dir before it is
created, so `cleanup` finds it after a crash. Ports are published on the bridge address only. Docker's own
errors leave this module as hcu's (docker_engine.engine_calls, or the readiness step they end).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from hcu.defaults import GUEST
from hcu.osworld.guest import control as controls
from hcu.osworld.guest import memory, readiness
from hcu.osworld.guest import overlay as overlays
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.console import ContainerWatch
from hcu.osworld.guest.container_image import ContainerImage
from hcu.osworld.guest.docker_engine import docker_client, engine_calls
from hcu.osworld.guest.kinds import GuestFiles, GuestKind, GuestSpec, SavedDesktop
from hcu.osworld.guest.ports import CONTAINER_PORTS, GuestPorts
from hcu.osworld.guest.progress import WaitNote
from hcu.osworld.guest.readiness import Readiness, ReadinessStep
from hcu.osworld.records import interrupts
from hcu.osworld.records.identity import AttemptId

log = logging.getLogger(__name__)

STORAGE_MOUNT = "/storage"
"""The official image keeps its data disk here; a labelled named volume instead of an anonymous one."""
CONSOLE_TAIL_LINES = 300


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
    files: GuestFiles
    container_image: ContainerImage
    """The image the container runs, pinned by digest or id."""
    readiness: list[ReadinessStep] = field(default_factory=list)

    def api_url(self) -> str:
        return f"http://{self.host}:{self.ports.api}"

    @property
    def overlay(self) -> Path | None:
        return self.files.overlay

    def save_desktop(self, *, timeout_sec: float, labels: dict[str, str] | None = None) -> SavedDesktop:
        """Save this guest's desktop as it is now (the kind says what that holds), labelled with the attempt's
        labels and `labels`; it goes on running."""
        return self.spec.guest_kind.save_desktop(self, {**self.attempt.labels(), **(labels or {})},
                                                 timeout_sec=timeout_sec)


@dataclass
class BootRecord:
    """What a guest start leaves its caller, whether it succeeds or not: the readiness steps so far, and the
    kept console of a guest that did not come up. Beside the exception, not on it: a boot ends on any of many
    exceptions (a deadline, a stop signal, a guest or configuration failure)."""

    readiness: list[ReadinessStep] = field(default_factory=list)
    console_log: str | None = None
    """The path of the guest's log tail, kept before its removal when it did not come up."""


def container_name(attempt: AttemptId) -> str:
    raw = f"hcu-{attempt.run_id}-{attempt.task_key}-{attempt.attempt}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)[:200]


def volume_name(name: str) -> str:
    return f"{name}-storage"


def container_config(
    spec: GuestSpec, attempt: AttemptId, *, image: str, ports: GuestPorts, host: str, files: GuestFiles
) -> dict[str, Any]:
    """Keyword arguments for `containers.create` (from `image`, spec.container_image pinned): the container
    contract every guest kind honours, with what its kind adds."""
    name = container_name(attempt)
    options = spec.guest_kind.container_options(spec, files)
    config: dict[str, Any] = {
        "image": image,
        "name": name,
        "labels": attempt.labels(),
        "detach": True,
        "environment": {
            "RAM_SIZE": spec.ram_size,
            "CPU_CORES": str(spec.cpu_cores),
            "DISK_SIZE": f"{spec.volume_size_gb}G",
            **options.environment,
        },
        "ports": {f"{CONTAINER_PORTS[key]}/tcp": (host, port) for key, port in ports.model_dump().items()},
        "volumes": {volume_name(name): {"bind": STORAGE_MOUNT, "mode": "rw"}, **options.volumes},
    }
    if options.devices:
        config["devices"] = options.devices
    if options.cap_add:
        config["cap_add"] = options.cap_add
    return config


def start_guest(
    spec: GuestSpec, attempt: AttemptId, *, work_dir: Path, boot_timeout_sec: float = GUEST.boot_timeout_sec,
    progress_file: Path | None = None, boot: BootRecord | None = None, restore: SavedDesktop | None = None,
    save_dir: Path | None = None,
) -> Guest:
    """Start the attempt's guest and return it once every readiness step passed.

    `work_dir` holds the guest's files (its overlay, the console of a failed boot), inside the attempt's result
    directory; `restore` is a saved desktop the guest starts from instead of booting (its clock then set to the
    host's); `save_dir` a folder its own desktop may be saved into later (`Guest.save_desktop`); `progress_file`
    is the attempt's progress.json (default: the one in that result directory), where a wait for memory shows;
    `boot` receives the readiness steps and the kept console as they happen. Raises GuestError naming the failed
    step (GuestMemoryError when the image exited for lack of memory), ConfigurationError for what no attempt could
    boot; on any failure, including an interrupt, everything this call created is removed."""
    deadline = time.monotonic() + boot_timeout_sec
    name = container_name(attempt)
    kind = spec.guest_kind
    boot = boot if boot is not None else BootRecord()
    steps = Readiness(name, boot.readiness)
    with engine_calls(f"guest {name}"):
        client = docker_client()
    created = False
    try:
        with steps.step("image checked"):
            image = kind.prepare_image(client, spec, restore)
        created = True
        with steps.step("memory admitted") as note:
            note.detail = _admit_memory(client, kind, spec, attempt,
                                        progress_file or work_dir.parent / "progress.json")
        with steps.step("resources created"):
            _remove_resources(client, name, keep_memory=True)  # this attempt's leftovers, if a crashed run left any
            host = bridge_address(client)
            files = kind.create_files(spec, name, attempt.labels(), work_dir, restore=restore, save_dir=save_dir)
            with interrupts.held():  # each call has the client's timeout
                client.volumes.create(name=volume_name(name), labels=attempt.labels())
            with port_leases.publishing_lock():
                ports = port_leases.allocate(client, name, attempt.labels(), host)
                config = container_config(spec, attempt, image=image.pinned, ports=ports, host=host, files=files)
                with interrupts.held():  # each call has the client's timeout
                    container = client.containers.create(**config)
            container.start()
        api = GuestAPI(f"http://{host}:{ports.api}", secret=spec.client_password)
        _gate(steps, kind, spec, ContainerWatch(container, name), api, files, deadline)
        return Guest(attempt, spec, name, container.id, host, ports, api, files, image, steps.steps)
    except BaseException:
        if created:
            boot.console_log = _keep_console(client, name, work_dir)
            _remove_after_failure(client, name)
        raise
    finally:
        client.close()


def _admit_memory(client: docker.DockerClient, kind: GuestKind, spec: GuestSpec, attempt: AttemptId,
                  progress_file: Path) -> str:
    """Wait until the host has the guest's memory (memory.py), the wait shown in the attempt's progress."""
    need, sized_by = kind.memory_need(spec.ram_size)
    wait_note = WaitNote(progress_file)
    try:
        return memory.admit(client, need, container_name(attempt), attempt.labels(), sized_by, wait_note)
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


def _gate(steps: Readiness, kind: GuestKind, spec: GuestSpec, watch: ContainerWatch, api: GuestAPI,
          files: GuestFiles, deadline: float) -> None:
    with steps.step("container running"):
        readiness.wait_running(watch, deadline)
    kind.resume(steps, files, deadline)
    with steps.step("api answers"):
        readiness.wait_api(api, watch, deadline)
    memory.mark_running(watch.name)  # its VM runs: its memory shows in what the host has available
    with steps.step("desktop painted"):
        readiness.wait_painted(api, watch, deadline)
    with steps.step("sudo works"):
        readiness.check_sudo(api, spec.client_password)
    kind.last_steps(steps, api, spec)
    if files.restore is not None:  # its clock stood still from the save: tasks read dates and file times
        with steps.step("clock set") as note:
            note.detail = readiness.set_clock(api, spec.client_password)


def _remove_resources(client: docker.DockerClient, name: str, *, keep_memory: bool = False) -> None:
    """Container (with its anonymous volumes), storage volume, overlay, port lease, memory reservation: in that
    order, so the overlay is never deleted under a running QEMU, the ports stay leased until nothing publishes
    them and the memory stays reserved until the guest is gone."""
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(name).remove(v=True, force=True)
    with contextlib.suppress(docker.errors.NotFound):
        client.volumes.get(volume_name(name)).remove(force=True)
    overlays.remove_overlay(name)
    controls.remove(name)
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
    with engine_calls(f"removing guest {guest.name}"), contextlib.closing(docker_client()) as client:
        _remove_resources(client, guest.name)
