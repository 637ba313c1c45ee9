"""The official guest path on a real VM: hcu's `start_guest` booting the QEMU stand-in (scripts/qemu-guest), two
attempts at once, each on its own overlay of one base image.

Both guests boot once, together, for the whole module; each test leaves them usable, the last one removes them.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
import requests

from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import Guest, GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.overlay import image_info
from hcu.osworld.guest.readiness import GIB, MIN_GROWN_FRACTION, check_sudo
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.records.identity import AttemptId
from hcu.record_io import sha256_of_file
from tests.guest.conftest import QEMU_RUNNER_IMAGE
from tests.guest.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.kvm, pytest.mark.timeout(1200)]  # the first test waits for the boot

VOLUME_GB = 64  # OSWorld V1's volume_size, the stand-in disk's virtual size
READINESS = ["image checked", "memory admitted", "resources created", "container running", "api answers",
             "desktop painted", "sudo works", "filesystem grown"]
GROWN = re.compile(r"root filesystem ([\d.]+) GiB -> ([\d.]+) GiB \(volume_size 64 GiB\)")
BOOT_TIMEOUT_SEC = 900.0
"""Two emulated (TCG) boots at once on a shared 2-core machine; one boot alone takes 1-2 minutes."""


class Pair:
    def __init__(self, base: Path, base_sha256: str, guests: list[Guest], run_id: str) -> None:
        self.base, self.base_sha256, self.guests, self.run_id = base, base_sha256, guests, run_id


@pytest.fixture(scope="module")
def pair(qemu_guest_disk: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two QEMU guests of one run, booted at the same time from the stand-in disk."""
    run_id = f"test-qemu-{uuid.uuid4().hex[:8]}"
    before = sha256_of_file(qemu_guest_disk)
    spec = GuestSpec(kind="qemu", image=str(qemu_guest_disk), docker_image=QEMU_RUNNER_IMAGE,
                     volume_size_gb=VOLUME_GB, ram_size="2G", cpu_cores=2)
    work = tmp_path_factory.mktemp("qemu")
    try:
        with ThreadPoolExecutor(2) as pool:
            booting = [pool.submit(start_guest, spec, AttemptId(run_id=run_id, task_id="pair", attempt=n),
                                   work_dir=work, boot_timeout_sec=BOOT_TIMEOUT_SEC) for n in (1, 2)]
            guests = [future.result() for future in booting]
        yield Pair(qemu_guest_disk, before, guests, run_id)
    finally:
        cleanup(run_id=run_id)


def run(guest: Guest, script: str) -> str:
    result = guest.api.execute(["bash", "-c", script], timeout_sec=60)
    assert result.returncode == 0, result.error
    return result.output


def test_readiness_waits_for_the_vm_and_times_each_step(pair: Pair) -> None:
    for guest in pair.guests:
        assert [step.name for step in guest.readiness] == READINESS
        assert all(step.ok and step.error is None and step.duration_sec >= 0 for step in guest.readiness)
        grown = GROWN.fullmatch(guest.readiness[-1].detail or "")
        assert grown, guest.readiness[-1].detail
        assert float(grown[1]) < VOLUME_GB * MIN_GROWN_FRACTION <= float(grown[2]) <= VOLUME_GB


def test_the_root_filesystem_fills_the_disk_measured_inside_the_guest(pair: Pair) -> None:
    guest = pair.guests[0]
    fs_bytes = int(run(guest, "findmnt -bno SIZE /"))
    disk, part = run(guest, 'r=$(findmnt -no SOURCE /); lsblk -bdno SIZE "/dev/$(lsblk -no PKNAME "$r")" "$r"').split()
    assert fs_bytes >= VOLUME_GB * GIB * MIN_GROWN_FRACTION
    assert int(disk) == image_info(pair.base).virtual_size == VOLUME_GB * GIB
    assert int(disk) - int(part) < 4 << 20  # only the partition table and the BIOS boot partition stay outside
    assert run(guest, "findmnt -no FSTYPE /").strip() == "ext4"


def test_the_runner_honours_the_official_container_contract(pair: Pair) -> None:
    guest = pair.guests[0]
    with contextlib.closing(docker_client()) as client:
        container = client.containers.get(guest.container_id)
        attrs, log = container.attrs, container.logs().decode(errors="replace")
        chain = container.exec_run(["qemu-img", "info", "-U", "--output=json", "/boot.qcow2"]).output
        data_disk = container.exec_run(["stat", "-c", "%s %b %B", "/storage/data.img"])
    host_config = attrs["HostConfig"]
    assert [d["PathOnHost"] for d in host_config["Devices"]] == ["/dev/kvm"]
    assert host_config["CapAdd"] == ["NET_ADMIN"] and not host_config["Privileged"]
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert (env["RAM_SIZE"], env["CPU_CORES"], env["DISK_SIZE"], env["KVM"]) == ("2G", "2", "64G", "N")
    assert "CLIENT_PASSWORD" not in env, "the guest's password is the one in its qcow2 (sudo works with it below)"
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/System.qcow2"]["Source"] == str(guest.overlay) and mounts["/System.qcow2"]["RW"]
    assert mounts[str(pair.base)]["Source"] == str(pair.base) and not mounts[str(pair.base)]["RW"]
    assert mounts["/storage"]["Type"] == "volume"
    # TCG only because this image asks for it (KVM=N), and the runner says so
    assert "KVM=N: booting with TCG" in log and "accel=tcg cpu=qemu64 cores=2 ram=2G data disk=64G" in log
    # the official image's layout: the VM boots /boot.qcow2, the runner's own overlay over /System.qcow2 in the
    # container's writable layer (hcu's overlay stays as created: the guest's writes go away with the container)
    assert orjson.loads(chain)["backing-filename"] == "/System.qcow2"
    assert orjson.loads(chain)["virtual-size"] == VOLUME_GB * GIB, "the boot disk keeps the base's size"
    # the container runs the pinned image: a local build has no registry digest, so its id
    assert attrs["Config"]["Image"] == attrs["Image"] == guest.container_image.id
    assert guest.container_image.reference == QEMU_RUNNER_IMAGE
    # CPU_CORES and RAM_SIZE as the VM sees them
    cores, mem_kib = run(guest, "nproc; awk '/^MemTotal/ { print $2 }' /proc/meminfo").split()
    assert int(cores) == 2 and 1.5 * (1 << 20) < int(mem_kib) <= 2 * (1 << 20)
    # DISK_SIZE: a blank data disk beside the boot disk, a sparse raw file in /storage as in the official image
    assert run(guest, "lsblk -bdno NAME,SIZE | sort").split() == ["vda", str(VOLUME_GB * GIB), "vdb", str(64 * GIB)]
    size, blocks, block_size = (int(word) for word in data_disk.output.split())
    assert size == 64 * GIB and blocks * block_size < 1 << 20, "sparse and blank: nothing was written into it"


def test_two_attempts_at_once_have_their_own_overlay_and_files(pair: Pair) -> None:
    a, b = pair.guests
    assert a.overlay != b.overlay and a.overlay.parent == b.overlay.parent
    for guest in pair.guests:
        assert image_info(guest.overlay).virtual_size == VOLUME_GB * GIB
        info = subprocess.run(["qemu-img", "info", "-U", "--output=json", str(guest.overlay)],
                              capture_output=True, check=True, timeout=60).stdout
        assert orjson.loads(info)["backing-filename"] == str(pair.base)
    a.api.upload("/home/user/Desktop/only-in-a.txt", b"a")
    run(b, "echo b > /home/user/Desktop/only-in-b.txt")
    assert a.api.file("/home/user/Desktop/only-in-a.txt") == b"a"
    assert b.api.file("/home/user/Desktop/only-in-b.txt") == b"b\n"
    with pytest.raises(FileNotFoundError):
        b.api.file("/home/user/Desktop/only-in-a.txt")
    with pytest.raises(FileNotFoundError):
        a.api.file("/home/user/Desktop/only-in-b.txt")


def test_cdp_vlc_and_vnc_ports_reach_the_guest(pair: Pair) -> None:
    guest = pair.guests[1]
    served = {"cdp": guest.ports.cdp, "vlc": guest.ports.vlc}
    for name, container_port in (("cdp", 9222), ("vlc", 8080)):
        run(guest, f"mkdir -p /tmp/{name} && echo {name}-in-the-guest > /tmp/{name}/who")
        guest.api.launch(["python3", "-m", "http.server", str(container_port), "--directory", f"/tmp/{name}"])
    for name, host_port in served.items():
        url = f"http://{guest.host}:{host_port}/who"
        answer = wait_for(lambda url=url: _get_text(url), timeout_sec=120, what=f"the guest's {name} port")
        assert answer == f"{name}-in-the-guest\n"
    # 8006: the VM's screen, VNC over WebSocket (the official image serves noVNC there)
    assert _websocket_vnc_greeting(guest.host, guest.ports.vnc).startswith(b"RFB 003.")


def test_a_password_the_vm_refuses_is_a_configuration_error_naming_client_password(pair: Pair) -> None:
    """The V2 image's password on the V1-like stand-in: refused at once, told apart from a VM not ready yet."""
    with pytest.raises(ConfigurationError, match=r"^client_password: the guest's sudo refuses it"):
        check_sudo(pair.guests[0].api, "osworld-public-evaluation")


def test_removal_leaves_no_container_volume_overlay_or_lease_and_the_base_is_unchanged(pair: Pair) -> None:
    for guest in pair.guests:
        remove_guest(guest)
        assert not guest.overlay.exists()
    selector = {"label": ["hcu.managed=1", f"hcu.run_id={pair.run_id}"]}
    with contextlib.closing(docker_client()) as client:
        assert client.containers.list(all=True, filters=selector) == []
        assert client.volumes.list(filters=selector) == []
    assert port_leases.release_matching({"hcu.run_id": pair.run_id}) == []
    assert sha256_of_file(pair.base) == pair.base_sha256, "the base image was written"


def _get_text(url: str) -> str | None:
    with contextlib.suppress(requests.RequestException):
        response = requests.get(url, timeout=10)
        if response.status_code == 200:
            return response.text
    return None


def _websocket_vnc_greeting(host: str, port: int) -> bytes:
    """Open a WebSocket (binary subprotocol) and return the payload of the server's first frame."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: binary\r\n\r\n")
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096) or b"!"
            assert not data.endswith(b"!"), "the connection closed during the handshake"
        head, frame = data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head[:200]
        while len(frame) < 2 + 12:
            more = sock.recv(4096)
            assert more, "the connection closed before the VNC greeting"
            frame += more
    length = frame[1] & 0x7F
    return frame[2:2 + length]
