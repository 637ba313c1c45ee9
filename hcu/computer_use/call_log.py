"""The call log: every tool call this server serves, written inside the guest as the attempt's evidence.

On when the MCP server's environment names a folder (`HCU_CALL_LOG_DIR`, set by the runner's agent adapters):
one JSON line per record in `<folder>/calls.jsonl`, shared by every server process of the attempt (the agent CLI
starts one per turn), and the screen after each action as a reduced JPEG in `<folder>/shots/`. The folder is
bounded by a size cap per attempt (`HCU_CALL_LOG_CAP_BYTES`): what does not fit is dropped and the drop is
recorded. The records are only ever written here; nothing of them reaches the agent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

log = logging.getLogger("computer_use")

ENV_DIR = "HCU_CALL_LOG_DIR"
ENV_CAP = "HCU_CALL_LOG_CAP_BYTES"
CALLS_FILE = "calls.jsonl"
SHOTS_DIR = "shots"
DEFAULT_CAP_BYTES = 64 * 1024 * 1024
"""~700 reduced screenshots; an attempt of 100 model calls needs about a tenth of it."""
DROP_MARGIN_BYTES = 256 * 1024
"""Room beyond the cap for the small records that say what was dropped; nothing else may use it."""
TEXT_LIMIT = 20_000
"""Characters kept of a result text or a string argument (an observe of 300 nodes fits)."""
SIZE_CAP = "size_cap"


class StartRecord(BaseModel):
    """One server process started (one per agent turn)."""

    kind: Literal["start"] = "start"
    schema_version: int = 1
    process: str
    """Names this process's records and shot files."""
    pid: int
    at: float
    """Unix time on the guest's clock."""
    cap_bytes: int
    used_bytes: int
    """What the folder held when this process started (earlier turns)."""


class BeginRecord(BaseModel):
    """A call started (its CallRecord follows when it ends): a call the agent's end cut short still shows."""

    kind: Literal["begin"] = "begin"
    process: str
    seq: int
    tool: str
    at: float


class CallRecord(BaseModel):
    """One tools/call as the server saw it: what it was asked and what it answered."""

    kind: Literal["call"] = "call"
    process: str
    seq: int
    """Order of calls within the process, from 1."""
    tool: str
    arguments: dict[str, Any] | None
    started_at: float
    ended_at: float
    """Unix times on the guest's clock."""
    error: bool
    result: str | None
    """The result's text parts (an error's message); None when dropped."""
    images: list[str] = []
    """The result's images as `<mime type> <bytes>` (the images themselves are not kept here)."""
    clipped_chars: int = 0
    """Characters cut from the result text and string arguments (TEXT_LIMIT each)."""
    dropped: str | None = None
    """`size_cap`: arguments and result did not fit under the cap."""


class ShotRecord(BaseModel):
    """The screen after a call: the action's effect, or the image the model was shown."""

    kind: Literal["shot"] = "shot"
    process: str
    seq: int
    """The call it follows."""
    at: float
    file: str | None = None
    """Relative to the folder (`shots/<process>-<seq>.jpg`); None when dropped."""
    width: int = 0
    height: int = 0
    screen_width: int = 0
    screen_height: int = 0
    pointer: tuple[int, int] | None = None
    """After a pointer action: where the pointer is, in screen pixels."""
    dropped: str | None = None
    """`size_cap`, or why the capture failed."""


CallLogRecord = Annotated[StartRecord | BeginRecord | CallRecord | ShotRecord, Field(discriminator="kind")]


class CallLog:
    """The writer of one server process. Thread-safe: calls end on the event loop, shots land from a thread."""

    def __init__(self, folder: Path, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        (folder / SHOTS_DIR).mkdir(parents=True, exist_ok=True)
        self.folder, self.cap_bytes = folder, cap_bytes
        self.process = uuid.uuid4().hex[:10]
        self.used = _bytes_under(folder)
        self._lock = threading.Lock()
        self._seq = 0
        self._fd = os.open(folder / CALLS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.write(StartRecord(process=self.process, pid=os.getpid(), at=time.time(), cap_bytes=cap_bytes,
                               used_bytes=self.used), drop_record=True)

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def fits(self, size: int, *, drop_record: bool = False) -> bool:
        return self.used + size <= self.cap_bytes + (DROP_MARGIN_BYTES if drop_record else 0)

    def write(self, record: BaseModel, *, drop_record: bool = False) -> bool:
        """Append one line (one write: lines of concurrent processes never interleave); False when it did not fit."""
        line = record.model_dump_json().encode() + b"\n"
        with self._lock:
            if not self.fits(len(line), drop_record=drop_record):
                return False
            os.write(self._fd, line)
            self.used += len(line)
        return True

    def write_call(self, record: CallRecord) -> None:
        """The whole record, else the record without arguments and result, else nothing (the cap is spent)."""
        if self.write(record):
            return
        self.write(record.model_copy(update={"arguments": None, "result": None, "images": [],
                                             "dropped": SIZE_CAP}), drop_record=True)

    def write_shot(self, seq: int, jpeg: bytes) -> str | None:
        """Store a shot's JPEG; its path relative to the folder, or None when it does not fit under the cap."""
        name = f"{SHOTS_DIR}/{self.process}-{seq:05d}.jpg"
        with self._lock:
            if not self.fits(len(jpeg)):
                return None
            fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, jpeg)
            finally:
                os.close(fd)
            self.used += len(jpeg)
        return name


def clip(text: str) -> tuple[str, int]:
    """`text` within TEXT_LIMIT characters, and how many were cut."""
    return (text, 0) if len(text) <= TEXT_LIMIT else (text[:TEXT_LIMIT], len(text) - TEXT_LIMIT)


def open_from_env() -> CallLog | None:
    """The call log the environment asks for; None when off, or when the folder cannot be used (the server then
    serves without one: evidence never costs the agent its tools)."""
    folder = os.environ.get(ENV_DIR)
    if not folder:
        return None
    try:
        cap = int(os.environ.get(ENV_CAP) or DEFAULT_CAP_BYTES)
        return CallLog(Path(folder), cap)
    except (OSError, ValueError) as exc:
        log.warning("call log off: %s=%s cannot be used (%s)", ENV_DIR, folder, exc)
        return None


def _bytes_under(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
