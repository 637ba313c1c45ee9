"""computer-use's call log as brought home: each call with the shot taken after it, on both clocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import TypeAdapter, ValidationError

from hcu.computer_use.call_log import BeginRecord, CallLogRecord, CallRecord, ShotRecord, StartRecord
from hcu.osworld.evidence.atif import STEPS_DIR
from hcu.osworld.evidence.guest_fetch import CALL_LOG_NAME

RECORD = TypeAdapter(CallLogRecord)


@dataclass
class GuestCall:
    record: CallRecord
    shot: ShotRecord | None = None
    screenshot: str | None = None
    """The shot's file relative to the task folder, when it was brought home."""
    offset_sec: float = 0.0
    finished: bool = True
    """False for a call computer-use saw begin but not end (the attempt ended during it)."""

    @property
    def host_started_at(self) -> float:
        return self.record.started_at - self.offset_sec

    @property
    def host_ended_at(self) -> float:
        return self.record.ended_at - self.offset_sec

    @property
    def key(self) -> str:
        return f"{self.record.process}-{self.record.seq}"


@dataclass
class GuestLog:
    calls: list[GuestCall] = field(default_factory=list)
    """In the order they started."""
    starts: list[StartRecord] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    unreadable_lines: int = 0

    @property
    def cap_bytes(self) -> int | None:
        return self.starts[-1].cap_bytes if self.starts else None


def read_guest_log(result_dir: Path, offset_sec: float) -> GuestLog:
    """The task folder's copy of the call log (empty when none was brought home)."""
    path = result_dir / CALL_LOG_NAME
    log = GuestLog()
    if not path.is_file():
        return log
    calls: dict[tuple[str, int], GuestCall] = {}
    for line in path.read_bytes().splitlines():
        try:
            record = RECORD.validate_python(orjson.loads(line))
        except (orjson.JSONDecodeError, ValidationError):
            log.unreadable_lines += 1
            continue
        if isinstance(record, StartRecord):
            log.starts.append(record)
        elif isinstance(record, BeginRecord):
            calls[(record.process, record.seq)] = _in_flight(record, offset_sec)
        elif isinstance(record, CallRecord):
            calls[(record.process, record.seq)] = GuestCall(record, offset_sec=offset_sec)
            if record.dropped:
                log.dropped.append({"item": f"call {record.process}-{record.seq} arguments and result",
                                    "reason": record.dropped})
        elif (call := calls.get((record.process, record.seq))) is not None:
            _attach_shot(call, record, result_dir, log)
    log.calls = sorted(calls.values(), key=lambda c: (c.record.started_at, c.record.process, c.record.seq))
    return log


def _in_flight(begin: BeginRecord, offset_sec: float) -> GuestCall:
    record = CallRecord(process=begin.process, seq=begin.seq, tool=begin.tool, arguments=None,
                        started_at=begin.at, ended_at=begin.at, error=False, result=None)
    return GuestCall(record, offset_sec=offset_sec, finished=False)


def _attach_shot(call: GuestCall, shot: ShotRecord, result_dir: Path, log: GuestLog) -> None:
    call.shot = shot
    if shot.dropped:
        log.dropped.append({"item": f"screenshot after call {call.key}", "reason": shot.dropped})
    elif shot.file and (result_dir / STEPS_DIR / Path(shot.file).name).is_file():
        call.screenshot = f"{STEPS_DIR}/{Path(shot.file).name}"
