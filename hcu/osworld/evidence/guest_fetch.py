"""Bring the guest's evidence home through the in-guest API: computer-use's call log and step screenshots, the
CLI's own transcript where one is read, and the guest clock's offset from the host's.

Bounded in bytes (what computer-use may write under its cap), in time and in trust: every answer is capped
before it is read, a screenshot must be a JPEG, credentials are removed before anything is written. A guest
that stopped answering costs what was not yet fetched, never the attempt.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from hcu.computer_use.call_log import CALLS_FILE, DEFAULT_CAP_BYTES, DROP_MARGIN_BYTES, SHOTS_DIR
from hcu.defaults import EVIDENCE
from hcu.osworld.evidence.atif import STEPS_DIR
from hcu.osworld.evidence.redact import Redactor
from hcu.osworld.guest.api import GuestAPI, GuestAPIError
from hcu.record_io import write_atomic

CALL_LOG_NAME = CALLS_FILE
"""The call log's copy in the task folder (credentials removed)."""
TRANSCRIPT_NAME = "transcript.jsonl"
"""The CLI's transcript's copy in the task folder (images and credentials removed)."""
JPEG_START = b"\xff\xd8\xff"
SHOT_NAME = re.compile(re.escape(SHOTS_DIR) + r"/[A-Za-z0-9_-]{1,40}\.jpg")
"""What computer-use names its shots; anything else in an untrusted guest's log is not fetched."""
IMAGE_DATA = r"s#(data:image/[A-Za-z0-9.+-]+;base64,)[A-Za-z0-9+/=]+#\1[omitted]#g"
"""sed: a transcript's inline images (megabytes each) stay in the guest."""


@dataclass
class Fetched:
    clock_offset_sec: float | None = None
    """Guest clock minus host clock; None when it could not be measured."""
    clock_uncertainty_sec: float | None = None
    transcript: str | None = None
    bytes: int = 0
    dropped: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def bring_home(api: GuestAPI | None, result_dir: Path, *, call_log_dir: str | None, transcript: str | None,
               redactor: Redactor, deadline_sec: float = EVIDENCE.collect_timeout_sec) -> Fetched:
    fetched = Fetched()
    if api is None:
        fetched.errors.append("no guest to collect from (it never started or is gone)")
        return fetched
    deadline = time.monotonic() + deadline_sec
    try:
        fetched.clock_offset_sec, fetched.clock_uncertainty_sec = clock_offset(api)
    except GuestAPIError as exc:
        fetched.errors.append(f"guest clock: {exc}")
    if call_log_dir:
        _call_log(api, result_dir, call_log_dir, redactor, fetched, deadline)
    if transcript:
        _transcript(api, result_dir, transcript, redactor, fetched)
    return fetched


def clock_offset(api: GuestAPI) -> tuple[float, float]:
    """(guest minus host, half the round trip it was read in) in seconds: of `EVIDENCE.clock_readings` the one with
    the shortest round trip (a loaded host answers late, and lopsidedly); an offset within that half round trip is
    indistinguishable from none and is 0 (a container shares the host's clock: read as 22 ms under load, it put a
    tool call before the generation that asked for it)."""
    readings = []
    for _ in range(EVIDENCE.clock_readings):
        before = time.time()
        answer = api.execute(["date", "+%s.%N"], timeout_sec=30)
        after = time.time()
        try:
            guest = float(answer.output.strip())
        except ValueError:
            raise GuestAPIError("/execute", None, f"date printed {answer.output.strip()[:40]!r}") from None
        readings.append(((after - before) / 2, guest - (before + after) / 2))
    uncertainty, offset = min(readings)
    return (0.0 if abs(offset) <= uncertainty else round(offset, 4)), round(uncertainty, 4)


def _call_log(api: GuestAPI, result_dir: Path, folder: str, redactor: Redactor, fetched: Fetched,
              deadline: float) -> None:
    budget = DEFAULT_CAP_BYTES + DROP_MARGIN_BYTES
    try:
        data = api.file(f"{folder}/{CALLS_FILE}", max_bytes=budget)
    except FileNotFoundError:
        fetched.errors.append("computer-use wrote no call log (no tool call reached it)")
        return
    except GuestAPIError as exc:
        fetched.errors.append(f"call log: {exc}")
        return
    write_atomic(result_dir / CALL_LOG_NAME, redactor.data(data))
    fetched.bytes += len(data)
    for shot in _shot_files(data):
        fetched.bytes += _shot(api, result_dir, f"{folder}/{shot}", budget - fetched.bytes, fetched, deadline)


def _shot_files(call_log: bytes) -> list[str]:
    names = []
    for line in call_log.splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        name = record.get("file") if isinstance(record, dict) and record.get("kind") == "shot" else None
        if isinstance(name, str) and SHOT_NAME.fullmatch(name):
            names.append(name)
    return names


def _shot(api: GuestAPI, result_dir: Path, guest_path: str, budget: int, fetched: Fetched, deadline: float) -> int:
    name = guest_path.rsplit("/", 1)[-1]
    why = "collect time budget spent" if time.monotonic() > deadline else None
    data = b""
    if why is None:
        try:
            data = api.file(guest_path, max_bytes=max(0, budget))
        except (FileNotFoundError, GuestAPIError) as exc:
            why = f"not brought home: {exc}"
    if why is None and not data.startswith(JPEG_START):
        why = "not a JPEG"
    if why is not None:
        fetched.dropped.append({"item": f"screenshot {name}", "reason": why})
        return 0
    write_atomic(result_dir / STEPS_DIR / name, data)
    return len(data)


def _transcript(api: GuestAPI, result_dir: Path, path: str, redactor: Redactor, fetched: Fetched) -> None:
    copy = f"{path}.hcu-evidence"
    try:
        stripped = api.execute(["sh", "-c", f"sed -E {shlex.quote(IMAGE_DATA)} {shlex.quote(path)} > "
                                f"{shlex.quote(copy)}"], timeout_sec=60)
        if stripped.returncode != 0:
            fetched.errors.append(f"transcript {path}: {stripped.error.strip()[-200:] or 'not readable'}")
            return
        data = redactor.data(api.file(copy, max_bytes=EVIDENCE.transcript_max_bytes))
    except (FileNotFoundError, GuestAPIError) as exc:
        fetched.errors.append(f"transcript {path}: {exc}")
        return
    write_atomic(result_dir / TRANSCRIPT_NAME, data)
    fetched.transcript = data.decode("utf-8", "replace")
    fetched.bytes += len(data)
