"""The screen recording around the agent phase, on the test desktop's real ffmpeg x11grab: recording.mp4 when
asked for, nothing when not, and a recording that fails never fails what it wraps (the report says why)."""

from __future__ import annotations

import socket
import time

import pytest

from hcu.osworld.evidence.recording import RECORDING_NAME, recording
from hcu.osworld.guest.api import GuestAPI
from tests.agents.live import desktop_container
from tests.evidence.live_agent import guest_address

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def guest_api():
    with desktop_container("test-evidence", "recording") as guest:
        yield guest, GuestAPI(f"http://{guest_address(guest)}:5000", timeout_sec=60)


def test_the_agent_phase_is_recorded_to_an_mp4(guest_api, tmp_path):
    guest, api = guest_api
    with recording(api, tmp_path, enabled=True) as report:
        for x in (100, 400, 700):
            guest.run(["xdotool", "mousemove", str(x), "300"])
            time.sleep(0.5)
    assert report.error is None, report.error
    data = (tmp_path / RECORDING_NAME).read_bytes()
    assert data[4:8] == b"ftyp" and report.bytes == len(data) and report.file == RECORDING_NAME
    assert report.started_at < report.ended_at


def test_no_recording_unless_asked(guest_api, tmp_path):
    _, api = guest_api
    with recording(api, tmp_path, enabled=False) as report:
        pass
    assert (report.requested, report.file, report.error) == (False, None, None)
    assert not (tmp_path / RECORDING_NAME).exists()


def test_a_recording_that_fails_never_fails_the_phase(guest_api, tmp_path):
    _, api = guest_api
    with pytest.raises(ZeroDivisionError), recording(api, tmp_path, enabled=True) as report:
        api.end_recording(tmp_path / "taken-away.mp4", max_bytes=10**9)  # someone else stopped it
        raise ZeroDivisionError  # the phase's own failure passes through unchanged
    assert report.file is None and "not kept" in report.error and "400" in report.error
    with recording(api, tmp_path / "small", enabled=True, max_bytes=10) as small:
        time.sleep(1)
    assert "larger than 10 bytes" in small.error and not (tmp_path / "small" / RECORDING_NAME).exists()


def test_a_guest_that_is_gone_costs_only_the_recording(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with recording(GuestAPI(f"http://127.0.0.1:{port}", timeout_sec=5), tmp_path, enabled=True) as report:
        ran = True
    assert ran and report.file is None and "did not start recording" in report.error
