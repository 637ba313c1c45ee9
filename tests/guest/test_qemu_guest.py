"""The official guest path on a real VM: the QEMU stand-in (scripts/qemu-guest) booted from nothing once (the
session's snapshot warm-up: `start_guest`'s cold path, readiness and growth), then two attempts at once restored
from that snapshot, each on its own overlay, sharing nothing writable.

Both guests start once, together, for the whole module; each test leaves them usable, the last one removes them.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
import requests

from hcu.osworld.errors import ConfigurationError
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import BootRecord, Guest, remove_guest, start_guest
from hcu.osworld.guest.overlay import image_info
from hcu.osworld.guest.readiness import GIB, MIN_GROWN_FRACTION, check_sudo, clock_difference
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest_state.snapshots import SnapshotCache, SnapshotEntry
from hcu.osworld.guest_state.start import StartRecord, start
from hcu.osworld.records.identity import AttemptId
from hcu.record_io import sha256_of_file, write_record
from tests.guest.conftest import QEMU_RUNNER_IMAGE, qemu_spec
from tests.guest.vnc import websocket_vnc_greeting
from tests.guest.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.kvm, pytest.mark.timeout(1200)]  # the first test waits for the boot

VOLUME_GB = 64  # OSWorld V1's volume_size, the stand-in disk's virtual size
COLD_READINESS = ["image checked", "memory admitted", "resources created", "container running", "api answers",
                  "desktop painted", "sudo works", "filesystem grown"]
RESTORED_READINESS = [*COLD_READINESS[:4], "state restored", *COLD_READINESS[4:], "clock set"]
GROWN = re.compile(r"root filesystem ([\d.]+) GiB -> ([\d.]+) GiB \(volume_size 64 GiB\)")
START_TIMEOUT_SEC = 900.0
CORES = 4
"""run_task's default CPU_CORES (GUEST.cpu_cores): every QEMU test shares one configuration, so one snapshot."""


class Pair:
    def __init__(self, base: Path, hashes: dict[Path, str], guests: list[Guest], starts: list[StartRecord],
                 snapshot: SnapshotEntry, run_id: str) -> None:
        self.base, self.hashes, self.guests, self.starts, self.run_id = base, hashes, guests, starts, run_id
        self.snapshot = snapshot


@pytest.fixture(scope="module")
def pair(qemu_guest_disk: Path, qemu_snapshot: SnapshotEntry,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two QEMU guests of one run, restored at the same time from the session's snapshot of the stand-in."""
    run_id = f"test-qemu-{uuid.uuid4().hex[:8]}"
    read_only = [qemu_guest_disk, qemu_snapshot.machine.disk, qemu_snapshot.machine.state_file]
    hashes = {path: sha256_of_file(path) for path in read_only}
    work = tmp_path_factory.mktemp("qemu")

    def restored(n: int) -> tuple[Guest, StartRecord]:
        save_dir = work / f"keep-{n}"
        save_dir.mkdir()
        return start(qemu_spec(qemu_guest_disk), AttemptId(run_id=run_id, task_id="pair", attempt=n),
                     asked="snapshot", cache_dir=None, work_dir=work, boot_timeout_sec=START_TIMEOUT_SEC,
                     boot=BootRecord(), progress_file=work / f"progress-{n}.json", save_dir=save_dir)

    try:
        with ThreadPoolExecutor(2) as pool:
            started = list(pool.map(restored, (1, 2)))
        yield Pair(qemu_guest_disk, hashes, [g for g, _ in started], [r for _, r in started], qemu_snapshot, run_id)
    finally:
        cleanup(run_id=run_id)


def run(guest: Guest, script: str) -> str:
    result = guest.api.execute(["bash", "-c", script], timeout_sec=60)
    assert result.returncode == 0, result.error
    return result.output


def test_the_cold_boot_waits_for_the_vm_and_grows_its_filesystem(pair: Pair) -> None:
    """The snapshot's warm-up is a boot from nothing: every readiness step, the root filesystem grown."""
    warm_up = pair.snapshot.readiness
    assert [step.name for step in warm_up] == COLD_READINESS
    assert all(step.ok and step.error is None and step.duration_sec >= 0 for step in warm_up)
    grown = GROWN.fullmatch(warm_up[-1].detail or "")
    assert grown, warm_up[-1].detail
    assert float(grown[1]) < VOLUME_GB * MIN_GROWN_FRACTION <= float(grown[2]) <= VOLUME_GB


def test_restored_guests_pass_the_same_readiness_steps_and_read_the_hosts_time(pair: Pair) -> None:
    for guest, record in zip(pair.guests, pair.starts, strict=True):
        assert (record.asked, record.got, record.reason) == ("snapshot", "snapshot", None)
        assert record.snapshot == f"{pair.snapshot.config.name}/{pair.snapshot.id}"
        assert [step.name for step in guest.readiness] == RESTORED_READINESS
        assert all(step.ok and step.error is None for step in guest.readiness)
        grown = GROWN.fullmatch(guest.readiness[-2].detail or "")
        assert grown and float(grown[1]) == float(grown[2]) >= VOLUME_GB * MIN_GROWN_FRACTION, (
            "restored already grown: the snapshot holds the warm-up's growth")
        behind, uncertainty = clock_difference(guest.api)
        assert abs(behind) <= 1.0 + uncertainty, f"the guest's clock is {behind:+.2f} s off the host's"
        uptime = float(run(guest, "cut -d' ' -f1 /proc/uptime"))
        assert uptime < pair.snapshot.boot_sec + 600, "a restored guest runs on from the warm-up's boot"


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
    assert (env["RAM_SIZE"], env["CPU_CORES"], env["DISK_SIZE"], env["KVM"]) == ("2G", str(CORES), "64G", "N")
    assert "CLIENT_PASSWORD" not in env, "the guest's password is the one in its qcow2 (sudo works with it below)"
    assert env["ARGUMENTS"] == "-qmp unix:/hcu-control/qmp.sock,server=on,wait=off -incoming defer", (
        "QEMU's monitor on the control folder and the restore, as qemus/qemu's extra QEMU parameters")
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    below = guest.overlay.with_name(f"{guest.overlay.stem}.below.qcow2")
    assert mounts["/System.qcow2"]["Source"] == str(guest.overlay) and mounts["/System.qcow2"]["RW"]
    assert mounts[str(pair.base)]["Source"] == str(pair.base) and not mounts[str(pair.base)]["RW"]
    assert mounts[str(below)]["Source"] == str(below) and not mounts[str(below)]["RW"]
    restore = mounts["/hcu-restore"]
    assert restore["Source"] == str(pair.snapshot.machine.state_file.parent) and not restore["RW"]
    assert mounts["/storage"]["Type"] == "volume"
    # TCG only because this image asks for it (KVM=N), and the runner says so
    assert "KVM=N: booting with TCG" in log and f"accel=tcg cpu=qemu64 cores={CORES} ram=2G data disk=64G" in log
    # the official image's layout: the VM boots /boot.qcow2, the runner's own overlay over /System.qcow2 in the
    # container's writable layer (hcu's overlay stays as created: the guest's writes go away with the container)
    assert orjson.loads(chain)["backing-filename"] == "/System.qcow2"
    assert orjson.loads(chain)["virtual-size"] == VOLUME_GB * GIB, "the boot disk keeps the base's size"
    # the container runs the pinned image: a local build has no registry digest, so its id
    assert attrs["Config"]["Image"] == attrs["Image"] == guest.container_image.id
    assert guest.container_image.reference == QEMU_RUNNER_IMAGE
    # CPU_CORES and RAM_SIZE as the VM sees them
    cores, mem_kib = run(guest, "nproc; awk '/^MemTotal/ { print $2 }' /proc/meminfo").split()
    assert int(cores) == CORES and 1.5 * (1 << 20) < int(mem_kib) <= 2 * (1 << 20)
    # DISK_SIZE: a blank data disk beside the boot disk, a sparse raw file in /storage as in the official image
    assert run(guest, "lsblk -bdno NAME,SIZE | sort").split() == ["vda", str(VOLUME_GB * GIB), "vdb", str(64 * GIB)]
    size, blocks, block_size = (int(word) for word in data_disk.output.split())
    assert size == 64 * GIB and blocks * block_size < 1 << 20, "sparse and blank: nothing was written into it"


def test_two_attempts_at_once_have_their_own_overlay_and_files(pair: Pair) -> None:
    """Restored from one snapshot at once, they share nothing writable: each overlay stands on its own link to the
    snapshot's frozen disk, which stands on the base image."""
    a, b = pair.guests
    assert a.overlay != b.overlay and a.overlay.parent == b.overlay.parent
    for guest in pair.guests:
        assert image_info(guest.overlay).virtual_size == VOLUME_GB * GIB
        chain = orjson.loads(subprocess.run(
            ["qemu-img", "info", "-U", "--backing-chain", "--output=json", str(guest.overlay)],
            capture_output=True, check=True, timeout=60).stdout)
        below = guest.overlay.with_name(f"{guest.overlay.stem}.below.qcow2")
        assert [layer.get("backing-filename") for layer in chain] == [str(below), str(pair.base), None]
        assert below.stat().st_ino == pair.snapshot.machine.disk.stat().st_ino
    a.api.upload("/home/user/Desktop/only-in-a.txt", b"a")
    run(b, "echo b > /home/user/Desktop/only-in-b.txt")
    assert a.api.file("/home/user/Desktop/only-in-a.txt") == b"a"
    assert b.api.file("/home/user/Desktop/only-in-b.txt") == b"b\n"
    with pytest.raises(FileNotFoundError):
        b.api.file("/home/user/Desktop/only-in-a.txt")
    with pytest.raises(FileNotFoundError):
        a.api.file("/home/user/Desktop/only-in-b.txt")


def test_restored_guests_reach_the_hosts_bridge_as_a_booted_one_does(pair: Pair) -> None:
    """Where hcu's gateway listens: the bridge address, through each guest's NAT."""
    with http.server.ThreadingHTTPServer((bridge_address(), 0), _Answers) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            for n, guest in enumerate(pair.guests):
                url = f"http://{server.server_address[0]}:{server.server_address[1]}/guest-{n}"
                said = run(guest, f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"{url}\", "
                                  "timeout=30).read().decode())'")
                assert said.strip() == f"/guest-{n}"
        finally:
            server.shutdown()


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


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
    assert websocket_vnc_greeting(guest.host, guest.ports.vnc).startswith(b"RFB 003.")


def test_a_password_the_vm_refuses_is_a_configuration_error_naming_client_password(pair: Pair) -> None:
    """The V2 image's password on the V1-like stand-in: refused at once, told apart from a VM not ready yet."""
    with pytest.raises(ConfigurationError, match=r"^client_password: the guest's sudo refuses it"):
        check_sudo(pair.guests[0].api, "osworld-public-evaluation")


def test_a_kept_desktop_restores_with_its_files_and_running_processes(pair: Pair, tmp_path: Path) -> None:
    """The whole machine is kept: a file written and a process started before the save are there in a new guest
    restored from it, and the guest that was saved runs on."""
    guest = pair.guests[1]
    run(guest, "echo before-the-save > ~/kept.txt; nohup sleep 4000 >/dev/null 2>&1 & sync")
    saved = guest.save_desktop(timeout_sec=300)
    assert saved.kind == "qemu" and saved.holds == ["memory", "devices", "disk"] and saved.machine is not None
    machine = saved.machine
    assert machine.disk.parent == machine.state_file.parent == guest.files.save_dir
    assert machine.backing == guest.files.save_dir / "below.qcow2", "the snapshot disk it stands on is kept with it"
    assert saved.bytes == machine.disk.stat().st_size + machine.state_file.stat().st_size
    assert saved.seconds > 0, "how long the guest was held is on record (bench_guest_start measures it)"
    assert not list(guest.files.save_dir.glob("*.partial"))
    run(guest, "echo after-the-save > ~/kept.txt")  # the saved guest runs on; its save does not change
    kept = {path: sha256_of_file(path) for path in (machine.disk, machine.state_file)}
    reopened = start_guest(qemu_spec(pair.base), AttemptId(run_id=pair.run_id, task_id="reopened", attempt=1),
                           work_dir=tmp_path, restore=saved, boot_timeout_sec=START_TIMEOUT_SEC)
    try:
        assert [step.name for step in reopened.readiness] == RESTORED_READINESS
        assert run(reopened, "cat ~/kept.txt").strip() == "before-the-save"
        assert "sleep 4000" in run(reopened, "pgrep -a sleep || true"), "the process kept running in the memory"
    finally:
        remove_guest(reopened)
    assert {path: sha256_of_file(path) for path in kept} == kept, "restoring a kept desktop never writes it"


def test_removal_leaves_no_container_volume_overlay_or_lease_and_the_base_is_unchanged(pair: Pair) -> None:
    for guest in pair.guests:
        remove_guest(guest)
        assert not guest.overlay.exists()
    selector = {"label": ["hcu.managed=1", f"hcu.run_id={pair.run_id}"]}
    with contextlib.closing(docker_client()) as client:
        assert client.containers.list(all=True, filters=selector) == []
        assert client.volumes.list(filters=selector) == []
    assert port_leases.release_matching({"hcu.run_id": pair.run_id}) == []
    for path, digest in pair.hashes.items():
        assert sha256_of_file(path) == digest, f"{path} was written (the base, or the snapshot's disk or state)"


def _get_text(url: str) -> str | None:
    with contextlib.suppress(requests.RequestException):
        response = requests.get(url, timeout=10)
        if response.status_code == 200:
            return response.text
    return None


def test_a_torn_or_stale_snapshot_is_never_current(qemu_snapshot: SnapshotEntry, tmp_path: Path) -> None:
    """A snapshot whose file is not the size it was saved with is torn, one whose runner image or base image
    changed is stale: neither is used (the attempt that finds it builds it again, and says why)."""
    cache = SnapshotCache(tmp_path / "cache")
    assert cache.current(qemu_snapshot.config) == (None, "missing")

    def planted(**changes: object) -> SnapshotEntry:
        folder = cache.folder / qemu_snapshot.config.name
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(qemu_snapshot.machine.state_file.parent, folder)
        machine = qemu_snapshot.machine.model_copy(update={"state_file": folder / "state.zst",
                                                           "disk": folder / "disk.qcow2"})
        entry = qemu_snapshot.model_copy(update={"machine": machine, **changes})
        write_record(folder / "entry.json", entry)
        return entry

    assert cache.current(planted().config)[0] is not None, "a faithful copy is current"
    assert cache.current(planted(state_bytes=qemu_snapshot.state_bytes - 1).config)[1].startswith(
        "torn: state.zst is missing or not the size it was saved with")
    assert cache.current(planted(runner_image_id="sha256:" + "0" * 64).config)[1].startswith(
        f"stale: the runner image {QEMU_RUNNER_IMAGE} is now ")
    assert cache.current(planted(base_sha256="0" * 64).config)[1].startswith("stale: the base image ")
