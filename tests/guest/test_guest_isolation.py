"""Two guests at once cannot reach each other's unauthenticated in-guest API, by published port or directly."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from hcu.defaults import GUEST
from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
from hcu.osworld.records.identity import AttemptId
from tests.session import unique_run_id

pytestmark = pytest.mark.docker
PROBE = ("import sys, urllib.request\n"
         "try:\n"
         "    urllib.request.urlopen(sys.argv[1], timeout=5); print('REACHED')\n"
         "except Exception as exc:\n"
         "    print('BLOCKED', type(exc).__name__)\n")


def test_a_guest_cannot_reach_another_guests_api(tmp_path: Path) -> None:
    spec = GuestSpec(kind="test-desktop", image=GUEST.test_desktop_image)
    run_id = unique_run_id("isolation")
    a = start_guest(spec, AttemptId(run_id=run_id, task_id="a", attempt=1), work_dir=tmp_path / "a")
    try:
        b = start_guest(spec, AttemptId(run_id=run_id, task_id="b", attempt=1), work_dir=tmp_path / "b")
        try:
            b_ip = docker.from_env().containers.get(b.container_id).attrs["NetworkSettings"]["IPAddress"]
            assert b.api.screenshot().startswith(b"\x89PNG"), "the host reaches guest b"
            for url in (f"http://{b.host}:{b.ports.api}/platform", f"http://{b_ip}:5000/platform"):
                out = a.api.execute(["python3", "-c", PROBE, url], timeout_sec=30).output
                assert out.startswith("BLOCKED"), f"guest a reached guest b at {url}: {out}"
        finally:
            remove_guest(b)
    finally:
        remove_guest(a)
