"""The screen recording of the agent phase (`record_video`): the guest's own `/start_recording` and
`/end_recording` (ffmpeg x11grab, as the official guest serves them) into `<task folder>/recording.mp4`.

A recording that fails never fails the attempt: the report says why there is none, for meta.json.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from hcu.defaults import EVIDENCE
from hcu.osworld.guest.api import GuestAPI, GuestAPIError

log = logging.getLogger("hcu.run_task")

RECORDING_NAME = "recording.mp4"


class RecordingReport(BaseModel):
    requested: bool
    file: str | None = None
    """Relative to the task folder, when a recording was kept."""
    bytes: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    """Why there is no recording (or why it may end early)."""


@contextmanager
def recording(api: GuestAPI, result_dir: Path, *, enabled: bool,
              max_bytes: int = EVIDENCE.recording_max_bytes) -> Iterator[RecordingReport]:
    """Record the guest's screen for the duration of the `with` block (the agent phase) when `enabled`.
    The block's own exception passes through unchanged; the recording's never does."""
    report = RecordingReport(requested=enabled)
    if not enabled:
        yield report
        return
    try:
        api.start_recording()
        report.started_at = time.time()
    except GuestAPIError as exc:
        report.error = f"the guest did not start recording: {exc}"
        log.warning("recording: %s", report.error)
        yield report
        return
    try:
        yield report
    finally:
        _finish(api, result_dir, report, max_bytes)


def _finish(api: GuestAPI, result_dir: Path, report: RecordingReport, max_bytes: int) -> None:
    try:
        report.bytes = api.end_recording(result_dir / RECORDING_NAME, max_bytes=max_bytes)
        report.file = RECORDING_NAME
    except (GuestAPIError, OSError) as exc:
        report.error = f"the recording was not kept: {exc}"
        log.warning("recording: %s", report.error)
    report.ended_at = time.time()
