"""Host ports for guests, allocated race-free across concurrent runner processes on one host.

One allocation file (`<state dir>/ports.json`) under a `FileLock` records every lease: owner (the container
name), the owner's pid and labels. A port is free when no lease holds it, no container publishes it and the OS
lets us bind it on the bridge address. A lease whose process is gone and whose container does not exist is
stale and reclaimed (a runner killed mid-boot). Leases are released on removal and by `cleanup`.

Runners with different state directories (two test sessions, two users) do not share the lease file; they
share the Docker engine. `publishing_lock()`, host-wide, spans leasing and creating the container that
publishes the ports, so each sees the other's created containers' ports as taken.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import docker
from filelock import FileLock
from pydantic import BaseModel

from hcu.osworld.guest.state_dir import LOCK_TIMEOUT_SEC, drop_matching, locked_table, pid_alive

PORT_RANGE_START = 20000
PORT_RANGE_END = 32000
"""Below Linux's ephemeral range (32768+), away from the official 5000/8006/8080/9222 defaults."""
LEASES = "ports.json"
PUBLISHING_LOCK = Path(tempfile.gettempdir()) / "hcu-guest-ports.lock"
"""One per host, whatever the state directory: the Docker engine's ports are one namespace."""


class GuestPorts(BaseModel):
    """Host ports published for one guest's container ports 5000, 9222, 8006 and 8080."""

    api: int
    cdp: int
    vnc: int
    vlc: int


CONTAINER_PORTS = {"api": 5000, "cdp": 9222, "vnc": 8006, "vlc": 8080}


class PortLease(BaseModel):
    owner: str
    pid: int
    labels: dict[str, str]
    ports: GuestPorts


def publishing_lock() -> FileLock:
    """Hold from leasing ports until the container publishing them exists (then its ports count as taken)."""
    return FileLock(str(PUBLISHING_LOCK), timeout=LOCK_TIMEOUT_SEC)


def _container_ports(client: docker.DockerClient) -> tuple[set[str], set[int]]:
    """Names of all containers and every host port any of them publishes (a container removed while the list is
    read, e.g. by another run, is skipped instead of failing the allocation)."""
    names, ports = set(), set()
    for container in client.containers.list(all=True, ignore_removed=True):
        names.add(container.name)
        for bindings in (container.attrs.get("HostConfig", {}).get("PortBindings") or {}).values():
            ports.update(int(b["HostPort"]) for b in bindings or [] if b.get("HostPort"))
    return names, ports


def _bindable(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def allocate(client: docker.DockerClient, owner: str, labels: dict[str, str], address: str) -> GuestPorts:
    """Lease four free host ports for `owner` (re-leasing replaces an earlier lease of the same owner)."""
    with locked_table(LEASES, PortLease) as leases:
        names, taken = _container_ports(client)
        for name in [n for n, lease in leases.items() if not pid_alive(lease.pid) and n not in names]:
            del leases[name]
        leases.pop(owner, None)
        for lease in leases.values():
            taken.update(lease.ports.model_dump().values())
        chosen = _pick(taken, address)
        ports = GuestPorts(**dict(zip(CONTAINER_PORTS, chosen, strict=True)))
        leases[owner] = PortLease(owner=owner, pid=os.getpid(), labels=labels, ports=ports)
        return ports


def _pick(taken: set[int], address: str) -> list[int]:
    chosen: list[int] = []
    for port in range(PORT_RANGE_START, PORT_RANGE_END):
        if port not in taken and _bindable(address, port):
            chosen.append(port)
            if len(chosen) == len(CONTAINER_PORTS):
                return chosen
    raise RuntimeError(f"no free host ports in {PORT_RANGE_START}-{PORT_RANGE_END} on {address}")


def release(owner: str) -> None:
    with locked_table(LEASES, PortLease) as leases:
        leases.pop(owner, None)


def release_matching(labels: dict[str, str]) -> list[str]:
    """Release every lease whose labels include all of `labels`; returns the owners released."""
    return drop_matching(LEASES, PortLease, labels)
