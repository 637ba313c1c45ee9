"""Boot to ready on the QEMU stand-in (scripts/qemu-guest): hcu's `start_guest` against a bare `docker run`.

Baseline, in the same process: a bare `docker run` of the same runner image on the same qcow2 (the image mounted
read-only at /System.qcow2, as OSWorld's own Docker provider does), polled the same way hcu's readiness polls:
`GET /screenshot` until it answers 200 with a painted screen. hcu adds the per-attempt overlay, port leases, the
sudo check and the in-guest filesystem growth. Printed: per-step means, totals and the ratio gated/bare.
The runner is `hcu-qemu-guest:tcg` (emulated: this machine's /dev/kvm cannot run a stock kernel).
Run standalone: `python bench/bench_qemu_boot.py`.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid

import requests
from bench_guest_boot import boot_rounds

from hcu import REPO_ROOT
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import GuestSpec
from hcu.osworld.guest.readiness import is_blank
from hcu.osworld.records.identity import AttemptId

RUNNER = "hcu-qemu-guest:tcg"
DISK = REPO_ROOT / "build" / "qemu-guest" / "test-desktop.qcow2"
ROUNDS = 2
BOOT_TIMEOUT_SEC = 900.0
GUEST_ENV = {"RAM_SIZE": "2G", "CPU_CORES": "2", "DISK_SIZE": "64G"}


def bare_boot_sec(run_id: str, n: int) -> float:
    """`docker run` of the runner with the API port published, polled until /screenshot shows a painted screen."""
    host = bridge_address()
    with socket.socket() as probe:  # a free port for the bare container
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    with contextlib.closing(docker_client()) as client:
        started = time.monotonic()
        container = client.containers.run(
            RUNNER, detach=True, environment=GUEST_ENV, devices=["/dev/kvm:/dev/kvm:rwm"], cap_add=["NET_ADMIN"],
            volumes={str(DISK): {"bind": "/System.qcow2", "mode": "ro"}}, ports={"5000/tcp": (host, port)},
            labels=AttemptId(run_id=run_id, task_id="bare", attempt=n).labels())
        try:
            while time.monotonic() - started < BOOT_TIMEOUT_SEC:
                with contextlib.suppress(requests.RequestException):
                    answer = requests.get(f"http://{host}:{port}/screenshot", timeout=(2, 10))
                    if answer.status_code == 200 and not is_blank(answer.content):
                        return time.monotonic() - started
                time.sleep(0.2)
            raise TimeoutError("the bare runner never showed a painted screen")
        finally:
            container.remove(v=True, force=True)


def main() -> None:
    spec = GuestSpec(kind="qemu", image=str(DISK), docker_image=RUNNER, volume_size_gb=64, ram_size="2G",
                     cpu_cores=2)
    run_id = f"bench-qemu-{uuid.uuid4().hex[:8]}"
    boot_rounds(f"QEMU guest boot to ready ({RUNNER}, {DISK.name})", run_id, ROUNDS,
                lambda n: bare_boot_sec(run_id, n), spec, BOOT_TIMEOUT_SEC)


if __name__ == "__main__":
    main()
