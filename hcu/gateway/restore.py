"""Counters and placements rebuilt from the token log when a gateway starts on an existing log.

A million rows must restore in seconds, so rows are not validated as `TokenLogRow`s: the log is read in
chunks, and each row the gateway wrote is split on `,"` into its leading fields. That split is exact because
the gateway writes rows with orjson in `TokenLogRow`'s field order, and inside a JSON string every quote is
escaped, so `,"` only ever appears between fields. A row that does not look exactly like that (a torn line,
hand edits, an older writer) is parsed with orjson instead, and skipped with a warning when unreadable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from hcu.gateway.budget import TaskState

log = logging.getLogger(__name__)

CHUNK_BYTES = 16 * 1024 * 1024
TRACKED = frozenset({"success", "failed", "rate_limited", "refused_budget", "disconnected"})
"""Outcomes of generations: the only rows that carry per-task state."""
_OUTCOMES = {f'outcome":"{o}"'.encode(): o for o in TRACKED}
_COUNTED = {b'counted":true': True, b'counted":false': False}
_WAIT_KEY = b'"rate_limit_wait_sec":'
_NO_WAIT = b'"rate_limit_wait_sec":0.0,'


@dataclass
class Restored:
    """What the log says about every task scope that made generations."""

    tasks: dict[str, TaskState] = field(default_factory=dict)
    placements: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Task -> (upstream resource, deployment) of its last contacted upstream."""
    rows: int = 0
    skipped: int = 0


def restore(path: Path) -> Restored:
    """Read the whole log at `path` (nothing when it does not exist)."""
    states: dict[bytes, TaskState] = {}
    places: dict[bytes, tuple[bytes, bytes]] = {}
    out = Restored()
    if not path.exists():
        return out
    with path.open("rb") as f:
        rest = b""
        while chunk := f.read(CHUNK_BYTES):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            _scan(lines, states, places, out)
        if rest.strip():
            _scan([rest], states, places, out)
    out.tasks = {task.decode(): st for task, st in states.items()}
    out.placements = {task.decode(): (up.decode(), dep.decode() if dep else None) for task, (up, dep) in
                      places.items()}
    return out


def _scan(lines: list[bytes], states: dict[bytes, TaskState], places: dict[bytes, tuple[bytes, bytes]],
          out: Restored) -> None:
    for line in lines:
        p = line.split(b',"', 11)
        if (len(p) == 12 and p[0][:8] == b'{"time":' and p[1][:7] == b'task":"' and p[3][:10] == b'upstream":'
                and p[4][:12] == b'deployment":' and p[8][:10] == b'outcome":"' and p[9] in _COUNTED
                and b"\\" not in p[1]):
            outcome = _OUTCOMES.get(p[8])
            wait = 0.0 if _NO_WAIT in p[11] else _wait_of(p[11])
            if outcome is None and wait is not None:
                out.rows += 1  # a call that carries no task state (free, refused, invalid)
                continue
            try:
                at = float(p[0][8:])
            except ValueError:
                wait = None
            if wait is not None:
                out.rows += 1
                task = p[1][7:-1]
                _apply(states, task, outcome, _COUNTED[p[9]], wait, at)
                if p[3] != b'upstream":null':
                    places[task] = (p[3][11:-1], p[4][13:-1] if p[4] != b'deployment":null' else b"")
                continue
        if line.strip():
            _slow(line, states, places, out)


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


def _apply(states: dict[bytes, TaskState], task: bytes, outcome: str, counted: bool, wait: float,
           at: float) -> None:
    st = states.get(task)
    if st is None:
        st = states[task] = TaskState()
    st.record(outcome, counted, generation=True)  # type: ignore[arg-type]
    if wait > 0:
        st.rate_limit_wait_sec += wait
        st.rate_limit_waits += 1
    st.last_activity_at = at


def _slow(line: bytes, states: dict[bytes, TaskState], places: dict[bytes, tuple[bytes, bytes]],
          out: Restored) -> None:
    """A row in any JSON layout: checked field by field, skipped when it is not a row."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        row = None
    task, outcome = (row.get("task"), row.get("outcome")) if isinstance(row, dict) else (None, None)
    counted, at = (row.get("counted"), row.get("time")) if isinstance(row, dict) else (None, None)
    wait = row.get("rate_limit_wait_sec", 0.0) if isinstance(row, dict) else None
    if not (isinstance(task, str) and isinstance(outcome, str) and isinstance(counted, bool)
            and isinstance(at, (int, float)) and isinstance(wait, (int, float))):
        out.skipped += 1
        log.warning("token log: skipping an unreadable line (%d bytes)", len(line))
        return
    out.rows += 1
    if outcome not in TRACKED:
        return
    key = task.encode()
    _apply(states, key, outcome, counted, float(wait), float(at))
    upstream, deployment = row.get("upstream"), row.get("deployment")
    if isinstance(upstream, str):
        places[key] = (upstream.encode(), deployment.encode() if isinstance(deployment, str) else b"")
