"""What hcu reads of the host its guests run on: its memory, and whether it can give the official guest KVM.

The official image (`happysixd/osworld-docker`, of the qemus/qemu lineage) exits 88 at its start unless
/dev/kvm is writable and the CPU's flags in /proc/cpuinfo show `vmx` or `svm`, and boots with TCG instead when
its environment says `KVM=N`. The official kind (kinds.QemuGuest) asks the same before a queue launches
anything (and on each Ray node) and before every guest it starts: one line naming what is missing, never a
boot.

The host's meminfo and cpuinfo are read from `$HCU_HOST_PROC` (default /proc): tests point it at a folder
holding their own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from hcu.osworld.errors import ConfigurationError

HOST_PROC_ENV = "HCU_HOST_PROC"
KVM_DEVICE = Path("/dev/kvm")
VIRTUALISATION_FLAGS = frozenset({"vmx", "svm"})
SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
GIB = 1 << 30


def host_proc() -> Path:
    return Path(os.environ.get(HOST_PROC_ENV) or "/proc")


def size_bytes(size: str) -> int:
    """`4G`, `8192M` (settings.SIZE, as QEMU's RAM_SIZE takes it) in bytes, binary units as the image reads
    them."""
    return int(size[:-1]) * SIZE_UNITS[size[-1]]


def gib(n_bytes: int) -> str:
    return f"{n_bytes / GIB:.1f} GiB"


@dataclass(frozen=True)
class HostMemory:
    total: int
    """MemTotal, bytes."""
    available: int
    """MemAvailable, bytes: what the official image reads (`free`'s "available")."""


def read_memory() -> HostMemory:
    """The host's MemTotal and MemAvailable from its meminfo."""
    path = host_proc() / "meminfo"
    fields = dict(re.findall(r"^(\w+):\s+(\d+) kB$", path.read_text(), flags=re.MULTILINE))
    try:
        return HostMemory(total=int(fields["MemTotal"]) << 10, available=int(fields["MemAvailable"]) << 10)
    except KeyError as missing:
        raise ConfigurationError(f"{path}: no {missing.args[0]} line (expected a Linux meminfo)") from None


def kvm_problem(device: Path = KVM_DEVICE, cpuinfo: Path | None = None) -> str | None:
    """Why this host cannot give a guest KVM, as the official image tests it; None when it can."""
    if not device.exists():
        return f"{device} is missing"
    try:
        os.close(os.open(device, os.O_WRONLY))
    except OSError as exc:
        return f"{device} is not writable ({exc.strerror})"
    cpuinfo = cpuinfo or host_proc() / "cpuinfo"
    flag_lines = re.findall(r"^flags\s*:(.*)$", cpuinfo.read_text(), flags=re.MULTILINE)
    if not {flag for line in flag_lines for flag in line.split()} & VIRTUALISATION_FLAGS:
        return (f"the CPU flags in {cpuinfo} show neither vmx nor svm (virtualisation is off in the firmware, or "
                "this is a VM without nested virtualisation)")
    return None


def check_kvm(device: Path = KVM_DEVICE, cpuinfo: Path | None = None) -> None:
    """ConfigurationError naming what is missing when the official guest could not get KVM here."""
    problem = kvm_problem(device, cpuinfo)
    if problem:
        raise ConfigurationError(f"KVM: {problem}: the official guest needs KVM (its image exits 88 without it)")


def boots_with_kvm(client: docker.DockerClient, image: str) -> bool:
    """Whether the container image asks for KVM: unless its environment says `KVM=N` (a TCG image, such as the
    QEMU stand-in's `:tcg`). An image not yet pulled is taken to ask for it, as the official one does."""
    try:
        env = client.images.get(image).attrs.get("Config", {}).get("Env") or []
    except docker.errors.ImageNotFound:
        return True
    values = dict(item.split("=", 1) for item in env if "=" in item)
    return not values.get("KVM", "Y").upper().startswith("N")
