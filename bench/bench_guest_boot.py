"""Guest boot on the test desktop: each readiness step of `start_guest`, and the cost of gating.

Baseline, in the same process: a bare `docker run` of the same image polled until `GET /screenshot` answers
(what OSWorld's own Docker provider waits for). Printed: per-step means, start_guest and remove_guest
totals, and the ratio of a gated boot to the bare one. Run standalone: `python bench/bench_guest_boot.py`.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import requests

from hcu.defaults import GUEST
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.records.identity import AttemptId

IMAGE = "hcu-test-desktop:latest"
ROUNDS = 3


def bare_boot_sec() -> float:
    """`docker run` with the API port published, polled until /screenshot answers 200."""
    host = bridge_address()
    with socket.socket() as probe:  # a free port for the bare container
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    with contextlib.closing(docker_client()) as client:
        started = time.monotonic()
        container = client.containers.run(IMAGE, detach=True, ports={"5000/tcp": (host, port)})
        try:
            while True:
                with contextlib.suppress(requests.RequestException):
                    if requests.get(f"http://{host}:{port}/screenshot", timeout=5).status_code == 200:
                        return time.monotonic() - started
                time.sleep(0.05)
        finally:
            container.remove(v=True, force=True)


def gated_boot(spec: GuestSpec, attempt: AttemptId, work_dir: Path,
               boot_timeout_sec: float = GUEST.boot_timeout_sec) -> tuple[dict[str, float], float, float]:
    """(readiness step durations, start_guest seconds, remove_guest seconds) of one gated boot."""
    started = time.monotonic()
    guest = start_guest(spec, attempt, work_dir=work_dir, boot_timeout_sec=boot_timeout_sec)
    boot = time.monotonic() - started
    started = time.monotonic()
    remove_guest(guest)
    return {step.name: step.duration_sec for step in guest.readiness}, boot, time.monotonic() - started


def boot_rounds(title: str, run_id: str, rounds: int, bare: Callable[[int], float], spec: GuestSpec,
                boot_timeout_sec: float = GUEST.boot_timeout_sec) -> None:
    """`rounds` times a bare boot then a gated one (round n is attempt n); means printed under `title`."""
    steps: dict[str, list[float]] = defaultdict(list)
    boots, removals, bares = [], [], []
    try:
        with tempfile.TemporaryDirectory() as work_dir:
            for n in range(1, rounds + 1):
                bares.append(bare(n))
                attempt = AttemptId(run_id=run_id, task_id="gated", attempt=n)
                durations, boot, removal = gated_boot(spec, attempt, Path(work_dir), boot_timeout_sec)
                for name, seconds in durations.items():
                    steps[name].append(seconds)
                boots.append(boot)
                removals.append(removal)
    finally:
        cleanup(run_id=run_id)
    print(f"{title}, {rounds} rounds (means, seconds)")
    for name, values in steps.items():
        print(f"  step {name:<22} {statistics.mean(values):8.3f}")
    print(f"  start_guest total        {statistics.mean(boots):8.3f}")
    print(f"  remove_guest             {statistics.mean(removals):8.3f}")
    print(f"  baseline bare run+poll   {statistics.mean(bares):8.3f}")
    print(f"  ratio gated/bare         {statistics.mean(boots) / statistics.mean(bares):8.2f}")


def main() -> None:
    boot_rounds(f"guest boot on {IMAGE}", f"bench-{uuid.uuid4().hex[:8]}", ROUNDS, lambda _n: bare_boot_sec(),
                GuestSpec(kind="test-desktop", image=IMAGE))


if __name__ == "__main__":
    main()
