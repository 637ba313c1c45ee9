"""Guest lifecycle against the real engine: readiness, the container contract, isolation, failures, ports."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from pydantic import ValidationError

from hcu.osworld.errors import ConfigurationError, GuestError, policy_for
from hcu.osworld.guest import control as controls
from hcu.osworld.guest import ports as port_leases
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.guest.kinds import GuestFiles, SavedDesktop
from hcu.osworld.guest.lifecycle import (
    BootRecord,
    Guest,
    GuestPorts,
    GuestSpec,
    bridge_address,
    container_config,
    container_name,
    remove_guest,
    start_guest,
)
from hcu.osworld.guest.machine_state import SavedMachine
from hcu.osworld.guest.overlay import check_image, create_overlay, image_info, remove_overlay
from hcu.osworld.guest.readiness import check_sudo, grow_filesystem, is_blank
from hcu.osworld.records.identity import AttemptId
from tests.guest.host_files import host_proc

MakeQcow2 = Callable[[str, str], Path]

READINESS = [
    "image checked",
    "memory admitted",
    "resources created",
    "container running",
    "api answers",
    "desktop painted",
    "sudo works",
]


def labelled(kind: str, attempt: AttemptId) -> list[str]:
    """Names of containers or volumes carrying the attempt's labels."""
    filters = {"label": [f"{k}={v}" for k, v in attempt.labels().items()]}
    with contextlib.closing(docker_client()) as client:
        if kind == "containers":
            return [c.name for c in client.containers.list(all=True, filters=filters)]
        return [v.name for v in client.volumes.list(filters=filters)]


def container_attrs(guest: Guest) -> dict:
    with contextlib.closing(docker_client()) as client:
        return client.containers.get(guest.container_id).attrs


@pytest.mark.docker
def test_bridge_address_is_docker0() -> None:
    assert bridge_address() == "172.17.0.1"


@pytest.mark.docker
def test_readiness_is_gated_and_timed(desktop_guest: Guest) -> None:
    assert [step.name for step in desktop_guest.readiness] == READINESS
    assert all(step.ok and step.error is None and step.duration_sec >= 0 for step in desktop_guest.readiness)
    assert desktop_guest.overlay is None


@pytest.mark.docker
def test_container_contract(desktop_guest: Guest) -> None:
    attrs = container_attrs(desktop_guest)
    assert attrs["Name"] == f"/hcu-{desktop_guest.attempt.run_id}-shared-1"
    assert desktop_guest.attempt.labels().items() <= attrs["Config"]["Labels"].items()
    bindings = attrs["HostConfig"]["PortBindings"]
    published = {
        int(port.split("/")[0]): (b[0]["HostIp"], int(b[0]["HostPort"])) for port, b in bindings.items()
    }
    ports = desktop_guest.ports
    host = desktop_guest.host
    assert published == {
        5000: (host, ports.api),
        9222: (host, ports.cdp),
        8006: (host, ports.vnc),
        8080: (host, ports.vlc),
    }
    assert host == "172.17.0.1"
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["CLIENT_PASSWORD"] == "password" and env["DISK_SIZE"] == "64G"
    storage = [m for m in attrs["Mounts"] if m["Destination"] == "/storage"]
    assert storage and storage[0]["Type"] == "volume"
    assert labelled("volumes", desktop_guest.attempt) == [storage[0]["Name"]]


@pytest.mark.docker
def test_guest_reaches_the_host_bridge_address(desktop_guest: Guest) -> None:
    """The model gateway binds the bridge address; the guest must reach it."""

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((bridge_address(), 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://{bridge_address()}:{server.server_address[1]}/"
        code = f"import urllib.request; print(urllib.request.urlopen('{url}', timeout=10).read().decode())"
        assert desktop_guest.api.execute(["python3", "-c", code]).output == "hello from the host\n"
    finally:
        server.shutdown()


@pytest.mark.docker
def test_two_guests_are_isolated_and_use_different_ports(
    desktop_guest: Guest, test_desktop_image: str, new_attempt: Callable[..., AttemptId], tmp_path: Path
) -> None:
    other = start_guest(
        GuestSpec(kind="test-desktop", image=test_desktop_image), new_attempt(), work_dir=tmp_path
    )
    try:
        assert set(other.ports.model_dump().values()).isdisjoint(desktop_guest.ports.model_dump().values())
        other.api.upload("/home/user/Desktop/only-here.txt", b"mine")
        desktop_guest.api.execute(["sh", "-c", "echo theirs > /tmp/only-there"])
        assert other.api.file("/home/user/Desktop/only-here.txt") == b"mine"
        with pytest.raises(FileNotFoundError):
            desktop_guest.api.file("/home/user/Desktop/only-here.txt")
        with pytest.raises(FileNotFoundError):
            other.api.file("/tmp/only-there")
    finally:
        remove_guest(other)


@pytest.mark.docker
def test_volume_larger_than_the_image_is_refused(
    test_desktop_image: str, new_attempt: Callable[..., AttemptId], make_qcow2: MakeQcow2, tmp_path: Path
) -> None:
    base = make_qcow2("small.qcow2", "1G")
    assert image_info(base).virtual_size == 1 << 30
    spec = GuestSpec(kind="qemu", image=str(base), docker_image=test_desktop_image, volume_size_gb=2)
    attempt = new_attempt()
    with pytest.raises(ConfigurationError) as refused:
        start_guest(spec, attempt, work_dir=tmp_path / "work")
    assert "volume_size 2 GiB exceeds the virtual size" in str(refused.value)
    assert refused.value.classification == "configuration", "never retried: it fails the same way every time"
    assert labelled("containers", attempt) == [] and not (tmp_path / "work").exists()


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["test-desktop", "qemu"])
def test_failed_readiness_names_the_step_and_removes_everything(
    kind: str,
    test_desktop_image: str,
    new_attempt: Callable[..., AttemptId],
    make_qcow2: MakeQcow2,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the test desktop's image in the official kind's place: a host whose CPU shows vmx (it asks for KVM)
    monkeypatch.setenv(HOST_PROC_ENV, str(host_proc(tmp_path / "proc")))
    image = test_desktop_image if kind == "test-desktop" else str(make_qcow2("base.qcow2", "1G"))
    spec = GuestSpec(
        kind=kind,
        image=image,
        docker_image=test_desktop_image,
        volume_size_gb=1,
        client_password="hunter2-secret",
    )
    attempt = new_attempt()
    boot = BootRecord()
    with pytest.raises(GuestError) as failed:
        start_guest(spec, attempt, work_dir=tmp_path / "work", boot_timeout_sec=0.2, boot=boot)
    steps = boot.readiness
    assert f"readiness step '{steps[-1].name}' failed: boot deadline passed" in str(failed.value)
    assert not steps[-1].ok and all(step.ok for step in steps[:-1])
    assert "hunter2-secret" not in str(failed.value) and "hunter2-secret" not in repr(spec)
    assert labelled("containers", attempt) == [] and labelled("volumes", attempt) == []
    assert port_leases.release_matching(attempt.labels()) == []
    console = tmp_path / "work" / f"{container_name(attempt)}.console.log"
    assert boot.console_log == str(console) and "hunter2-secret" not in console.read_text()
    assert list((tmp_path / "work").glob("*")) == [console]  # the qemu overlay is gone; the guest's log is kept


@pytest.mark.docker
@pytest.mark.timeout(90)  # a hang fails here instead of stalling the suite
def test_dead_guest_fails_fast(
    test_desktop_image: str, new_attempt: Callable[..., AttemptId], tmp_path: Path
) -> None:
    guest = start_guest(
        GuestSpec(kind="test-desktop", image=test_desktop_image), new_attempt(), work_dir=tmp_path
    )
    try:
        with contextlib.closing(docker_client()) as client:
            client.containers.get(guest.container_id).stop(timeout=1)
        api = guest.api
        calls = [
            api.screenshot,
            api.screen_size,
            lambda: api.file("/etc/hosts"),
            lambda: api.execute(["true"]),
            lambda: api.upload("/tmp/x", b"x"),
            lambda: api.launch(["true"]),
        ]
        for call in calls:
            with pytest.raises(GuestAPIError) as failed:
                call()
            assert failed.value.status is None
    finally:
        remove_guest(guest)


@pytest.mark.docker
def test_port_leases_are_disjoint_across_processes() -> None:
    """Eight live runner processes lease at once; no port is handed out twice; releasing frees the leases.
    (Each process stays alive until all have leased: a dead process's lease without a container is stale.)"""
    script = (
        "import sys, json; from hcu.osworld.guest import ports;"
        "from hcu.osworld.guest.docker_engine import docker_client;"
        "p = ports.allocate(docker_client(), sys.argv[1], {'hcu.run_id': 'lease-test'}, sys.argv[2]);"
        "print(json.dumps(p.model_dump()), flush=True); sys.stdin.read()"
    )
    owners = [f"lease-test-{i}" for i in range(8)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, owner, bridge_address()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for owner in owners
    ]
    try:
        leased = [json.loads(proc.stdout.readline()) for proc in procs]
        all_ports = [port for lease in leased for port in lease.values()]
        assert len(all_ports) == len(set(all_ports)) == 32
        assert sorted(port_leases.release_matching({"hcu.run_id": "lease-test"})) == sorted(owners)
    finally:
        for proc in procs:
            proc.communicate(timeout=60)


@pytest.mark.docker
def test_a_password_the_guest_refuses_is_a_configuration_error_naming_client_password(
    desktop_guest: Guest,
) -> None:
    """Told apart from a guest not ready yet: at once, never retried, the password itself never in the message."""
    with pytest.raises(ConfigurationError) as refused:
        check_sudo(desktop_guest.api, "not-the-password-42")
    assert str(refused.value).startswith("client_password: the guest's sudo refuses it")
    assert "not-the-password-42" not in str(refused.value)
    assert not policy_for(refused.value.classification).retry


@pytest.mark.docker
def test_sudo_that_fails_otherwise_is_a_guest_not_ready_yet(desktop_guest: Guest) -> None:
    """sudo not runnable (as on a guest whose API answers before the rest of it is up): tried again for the
    settle time, then a guest failure (retried), not a configuration one."""
    with contextlib.closing(docker_client()) as client:
        container = client.containers.get(desktop_guest.container_id)
        assert container.exec_run(["chmod", "000", "/usr/bin/sudo"], user="root").exit_code == 0
        try:
            not_runnable = r"^sudo with client_password failed for 2 s: returncode \d+, .*sudo: Permission denied"
            with pytest.raises(RuntimeError, match=not_runnable):
                check_sudo(desktop_guest.api, "password", settle_sec=2)
        finally:
            assert container.exec_run(["chmod", "4755", "/usr/bin/sudo"], user="root").exit_code == 0
    check_sudo(desktop_guest.api, "password")


@pytest.mark.docker
def test_growth_leaves_a_large_enough_root_filesystem_alone(desktop_guest: Guest) -> None:
    detail = grow_filesystem(desktop_guest.api, "password", 1)
    assert re.fullmatch(r"root filesystem ([\d.]+) GiB -> \1 GiB \(volume_size 1 GiB\)", detail), detail


@pytest.mark.docker
def test_growth_that_cannot_reach_volume_size_fails_without_naming_the_password(desktop_guest: Guest) -> None:
    """The test desktop's root is Docker's overlay filesystem, not a partition: nothing to grow."""
    with pytest.raises(RuntimeError) as failed:
        grow_filesystem(desktop_guest.api, "password-97531", 100_000)
    assert str(failed.value).startswith("growpart/resize2fs failed")
    assert "password-97531" not in str(failed.value)


@pytest.mark.docker
def test_a_dead_runners_lease_is_reclaimed() -> None:
    """A lease whose process died and whose container never appeared is taken back by the next allocation."""
    script = (
        "import sys; from hcu.osworld.guest import ports; from hcu.osworld.guest.docker_engine import docker_client;"
        "ports.allocate(docker_client(), 'hcu-stale-lease-test', {'hcu.run_id': 'stale'}, sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", script, bridge_address()], check=True, timeout=120)
    with contextlib.closing(docker_client()) as client:
        port_leases.allocate(client, "hcu-fresh-lease-test", {"hcu.run_id": "fresh"}, bridge_address())
    assert port_leases.release_matching({"hcu.run_id": "stale"}) == []
    assert port_leases.release_matching({"hcu.run_id": "fresh"}) == ["hcu-fresh-lease-test"]


# Pure logic (no engine) ---------------------------------------------------------------------------------


def test_container_name_is_sanitized() -> None:
    attempt = AttemptId(run_id="my run/2", task_id="os:abc", attempt=3)
    assert container_name(attempt) == "hcu-my-run-2-os-abc-3"


def test_guest_spec_is_strict() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        GuestSpec(kind="qemu", image="x.qcow2", volume_size=64)
    with pytest.raises(ValidationError, match="ram_size"):
        GuestSpec(kind="qemu", image="x.qcow2", ram_size="4 GB")
    with pytest.raises(ValidationError, match="kind"):
        GuestSpec(kind="vmware", image="x.vmx")


def test_qemu_container_config(make_qcow2: MakeQcow2, tmp_path: Path) -> None:
    base = make_qcow2("base.qcow2", "1G")
    overlay = create_overlay(base, tmp_path / "o.qcow2", "o", {})
    attempt = AttemptId(run_id="r", task_id="t", attempt=2)
    spec = GuestSpec(kind="qemu", image=str(base), volume_size_gb=1, ram_size="8G", cpu_cores=2)
    ports = GuestPorts(api=20000, cdp=20001, vnc=20002, vlc=20003)
    pinned = "happysixd/osworld-docker@sha256:" + "0" * 64
    files = GuestFiles(overlay=overlay, control_dir=tmp_path / "control")
    config = container_config(spec, attempt, image=pinned, ports=ports, host="172.17.0.1", files=files)
    assert spec.container_image == "happysixd/osworld-docker"
    assert config["image"] == pinned and config["name"] == "hcu-r-t-2"
    assert config["labels"] == attempt.labels()
    assert config["devices"] == ["/dev/kvm:/dev/kvm:rwm"] and config["cap_add"] == ["NET_ADMIN"]
    assert config["environment"] == {
        "RAM_SIZE": "8G", "CPU_CORES": "2", "DISK_SIZE": "1G",
        "ARGUMENTS": "-qmp unix:/hcu-control/qmp.sock,server=on,wait=off"}, (
        "the official image's password is the one in its qcow2: no CLIENT_PASSWORD; QEMU's monitor on the "
        "control folder, through qemus/qemu's ARGUMENTS")
    assert config["ports"] == {
        "5000/tcp": ("172.17.0.1", 20000),
        "9222/tcp": ("172.17.0.1", 20001),
        "8006/tcp": ("172.17.0.1", 20002),
        "8080/tcp": ("172.17.0.1", 20003),
    }
    assert config["volumes"] == {
        "hcu-r-t-2-storage": {"bind": "/storage", "mode": "rw"},
        str(overlay): {"bind": "/System.qcow2", "mode": "rw"},
        str(tmp_path / "control"): {"bind": "/hcu-control", "mode": "rw"},
        str(base): {"bind": str(base), "mode": "ro"},
    }


def test_a_restored_qemu_guest_waits_for_its_state_and_mounts_every_image_read_only(
        make_qcow2: MakeQcow2, tmp_path: Path) -> None:
    """A guest restored from a saved machine: QEMU starts with `-incoming defer`, the state's folder and every
    image under the overlay are mounted read-only (the saved disk, the image under it), nothing of them writable."""
    base = make_qcow2("base.qcow2", "1G")
    saved_dir = tmp_path / "saved"
    saved_dir.mkdir()
    saved_disk = create_overlay(base, saved_dir / "disk.qcow2", "saved", {})
    (saved_dir / "state.zst").write_bytes(b"")
    machine = SavedMachine(state_file=saved_dir / "state.zst", disk=saved_disk, backing=base, qemu_version="7.2.22",
                           bytes=0, seconds=0.0)
    restore = SavedDesktop(kind="qemu", machine=machine, holds=["memory"], bytes=0, seconds=0.0)
    spec = GuestSpec(kind="qemu", image=str(base), volume_size_gb=1)
    files = spec.guest_kind.create_files(spec, "restored", {"hcu.run_id": "r"}, tmp_path / "work", restore=restore,
                                         save_dir=tmp_path / "keep")
    below = files.overlay.with_name("restored.below.qcow2")
    assert files.overlay.parent == tmp_path / "work" and below.stat().st_ino == saved_disk.stat().st_ino, (
        "the overlay stands on a link of its own to the saved disk")
    options = spec.guest_kind.container_options(spec, files)
    assert options.environment["ARGUMENTS"].endswith(" -incoming defer")
    assert options.volumes[str(saved_dir)] == {"bind": "/hcu-restore", "mode": "ro"}
    assert options.volumes[str(tmp_path / "keep")] == {"bind": "/hcu-save", "mode": "rw"}
    for image in (below, base):
        assert options.volumes[str(image)] == {"bind": str(image), "mode": "ro"}
    assert [v["bind"] for v in options.volumes.values() if v["mode"] == "rw"] == [
        "/System.qcow2", "/hcu-control", "/hcu-save"]
    remove_overlay("restored")
    assert not below.exists() and saved_disk.exists(), "the link goes with the overlay, the saved disk stays"
    assert controls.remove("restored") == files.control_dir, "its control folder goes by its owner"


def test_test_desktop_config_asks_for_no_device_or_capability() -> None:
    spec = GuestSpec(kind="test-desktop", image="hcu-test-desktop:latest", client_password="pw")
    ports = GuestPorts(api=1, cdp=2, vnc=3, vlc=4)
    config = container_config(
        spec, AttemptId(run_id="r", task_id="t", attempt=1), image="sha256:abc", ports=ports, host="h",
        files=GuestFiles())
    assert config["image"] == "sha256:abc" and config["environment"]["CLIENT_PASSWORD"] == "pw"
    assert "devices" not in config and "cap_add" not in config


def test_check_image(make_qcow2: MakeQcow2, tmp_path: Path) -> None:
    image = make_qcow2("img.qcow2", "3G")
    assert check_image(image, 3).virtual_size == 3 << 30
    with pytest.raises(
        ConfigurationError, match=r"volume_size 4 GiB exceeds the virtual size of .*img.qcow2 \(3 GiB\)"
    ):
        check_image(image, 4)
    raw = tmp_path / "disk.raw"
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(raw), "1G"], check=True, timeout=30)
    with pytest.raises(ConfigurationError, match="format is raw, expected qcow2"):
        check_image(raw, 1)
    with pytest.raises(ConfigurationError, match="no such file"):
        check_image(tmp_path / "missing.qcow2", 1)


def test_is_blank() -> None:
    image = Image.new("RGB", (64, 48), (0, 0, 0))
    assert is_blank(png(image))
    image.putpixel((10, 10), (0, 0, 1))
    assert not is_blank(png(image))


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
