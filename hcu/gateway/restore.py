"""Counters and placements rebuilt from the token log when a gateway starts on an existing log.

A million rows must restore in seconds, so rows are not validated as `TokenLogRow`s: the log is read in
chunks, and each row the gateway wrote is split on `,"` into its leading fields. That split is exact because
the gateway writes rows with orjson in `TokenLogRow`'s field order, and inside a JSON string every quote is
escaped, so `,"` only ever appears between fields. A complete row ends with `}`; the writer never leaves a
torn row that does (it truncates a failed write, and ends a crash's torn line with TORN_LINE_END). A row that
does not look exactly like the writer's (a torn line, hand edits, an older writer) is parsed with orjson
instead, and skipped with a warning when unreadable.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from hcu.gateway.budget import TaskState

log = logging.getLogger("hcu.gateway")

CHUNK_BYTES = 16 * 1024 * 1024
TRACKED = frozenset({"success", "failed", "rate_limited", "refused_budget", "disconnected"})
"""Outcomes of generations: the only rows that carry per-task state."""
UNTRACKED = frozenset({"free", "refused_route", "invalid_request", "refused_log"})
_OUTCOMES: dict[bytes, str | None] = {  # None: a known outcome that carries no task state
    **{f'outcome":"{o}"'.encode(): o for o in TRACKED},
    **{f'outcome":"{o}"'.encode(): None for o in UNTRACKED},
}
_COUNTED = {b'counted":true': True, b'counted":false': False}
_WAIT_KEY = b'"rate_limit_wait_sec":'
_NO_WAIT = b'"rate_limit_wait_sec":0.0,'


@dataclass
class Restored:
    """What the log says about every task scope that made generations."""

    tasks: dict[str, TaskState] = field(default_factory=dict)
    placements: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Task -> (upstream resource, deployment) of its last generation."""
    rows: int = 0
    skipped: int = 0


class _Reader:
    """State while reading: per task key (the raw `task":"<id>"` field) one entry, [its state, and the raw
    time, upstream and deployment fields of its last row], decoded once per task at the end."""

    def __init__(self) -> None:
        self.entries: dict[bytes, list] = {}
        self.out = Restored()

    def scan(self, lines: list[bytes]) -> None:
        entries, outcomes, counted_of = self.entries, _OUTCOMES, _COUNTED
        rows = 0
        for line in lines:
            p = line.split(b',"', 11)
            outcome = outcomes.get(p[8], False) if len(p) == 12 and line[-1:] == b"}" else False
            counted = counted_of.get(p[9]) if outcome is not False else None
            if counted is None:
                if line.strip():
                    self.slow(line)
                continue
            rows += 1
            if outcome is None:
                continue  # a call that carries no task state (free, refused, invalid)
            entry = entries.get(p[1])
            if entry is None:
                if not _plain_row(p):
                    rows -= 1
                    self.slow(line)
                    continue
                entry = entries[p[1]] = [TaskState(), b"", b"", b""]
            entry[0].record(outcome, counted, True)
            if _NO_WAIT not in p[11]:
                _add_wait(entry[0], _wait_of(p[11]))
            entry[1], entry[2], entry[3] = p[0], p[3], p[4]  # the rest of the row is freed now
        self.out.rows += rows

    def slow(self, line: bytes) -> None:
        """A row in any JSON layout: checked field by field, skipped when it is not a row."""
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        row = row if isinstance(row, dict) else {}
        task, outcome, counted, at = row.get("task"), row.get("outcome"), row.get("counted"), row.get("time")
        wait = row.get("rate_limit_wait_sec", 0.0)
        if not (isinstance(task, str) and outcome in TRACKED | UNTRACKED and isinstance(counted, bool)
                and isinstance(at, (int, float)) and isinstance(wait, (int, float))):
            self.out.skipped += 1
            log.warning("token log: skipping an unreadable line (%d bytes)", len(line))
            return
        self.out.rows += 1
        if outcome in UNTRACKED:
            return
        key = b'task":' + orjson.dumps(task)  # the key a plain row of this task has: task":"<id>"
        entry = self.entries.setdefault(key, [TaskState(), b"", b"", b""])
        entry[0].record(outcome, counted, generation=True)
        _add_wait(entry[0], float(wait))
        entry[1:] = [b'{"time":' + orjson.dumps(at), b'upstream":' + orjson.dumps(row.get("upstream")),
                     b'deployment":' + orjson.dumps(row.get("deployment"))]

    def result(self) -> Restored:
        out = self.out
        for key, (st, at, upstream_field, deployment_field) in self.entries.items():
            task = key[7:-1].decode() if b"\\" not in key else orjson.loads(key[6:])  # escapes: slow rows only
            try:
                st.last_activity_at = float(at[8:])
                upstream, deployment = orjson.loads(upstream_field[10:]), orjson.loads(deployment_field[12:])
            except (ValueError, orjson.JSONDecodeError):
                upstream = deployment = None
                log.warning("token log: task %s: unreadable time or upstream in its last row", task)
            out.tasks[task] = st
            if isinstance(upstream, str):
                out.placements[task] = (upstream, deployment if isinstance(deployment, str) else None)
        return out


def restore(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Restored:
    """Read the whole log at `path` (nothing when it does not exist), `chunk_bytes` at a time."""
    reader = _Reader()
    if not path.exists():
        return reader.out
    gc_was_on = gc.isenabled()
    gc.disable()  # millions of short-lived row objects and no cycles: collections would only cost time
    try:
        with path.open("rb") as f:
            rest = b""
            while chunk := f.read(chunk_bytes):
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                reader.scan(lines)
            if rest.strip():
                reader.slow(rest)  # a last line without its newline: torn by a crash unless it parses whole
        return reader.result()
    finally:
        if gc_was_on:
            gc.enable()


def _plain_row(p: list[bytes]) -> bool:
    """The leading fields of a row as the gateway writes them (checked once per task)."""
    return (p[0].startswith(b'{"time":') and p[1].startswith(b'task":"') and p[1].endswith(b'"')
            and b"\\" not in p[1] and p[3].startswith(b'upstream":') and p[4].startswith(b'deployment":'))


def _wait_of(tail: bytes) -> float | None:
    start = tail.find(_WAIT_KEY)
    if start < 0:
        return None
    start += len(_WAIT_KEY)
    end = tail.find(b",", start)
    try:
        return float(tail[start : end if end >= 0 else None].rstrip(b"}"))
    except ValueError:
        return None


def _add_wait(st: TaskState, wait: float | None) -> None:
    if wait:
        st.rate_limit_wait_sec += wait
        st.rate_limit_waits += 1
