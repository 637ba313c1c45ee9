"""Counters and placements rebuilt from the token log when a gateway starts on an existing log.

A million rows must restore in seconds, so rows are not validated as `TokenLogRow`s: the log is read in
chunks, and each row the gateway wrote is split on `,"` into its leading fields. That split is exact because
the gateway writes rows with orjson in `TokenLogRow`'s field order, and inside a JSON string every quote is
escaped, so `,"` only ever appears between fields. A complete row ends with `}`; the writer never leaves a
torn row that does (it truncates a failed write, and ends a crash's torn line with TORN_LINE_END). A row that
does not look exactly like the writer's (a torn line, hand edits, an older writer) is parsed with orjson
instead, and skipped with a warning when unreadable; so is an aggregate row of refusals (at most one per scope
and minute).

Besides the counters of the scopes that made generations, the read gives what the log's ceilings and refusal
counters need (`hcu.gateway.ledger`): the bytes each scope's free calls and refusals take, the bytes refusal rows
take in all, and each scope's refusals by kind, from the rows of refusals and the aggregate rows. (The few rows
a client that left before anything went upstream gets on its own are not counted: a reader cannot tell them
from generations its client left.)
"""

from __future__ import annotations

import gc
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from hcu.gateway.budget import TaskState

log = logging.getLogger("hcu.gateway")

CHUNK_BYTES = 16 * 1024 * 1024
TRACKED = frozenset({"success", "failed", "rate_limited", "refused_budget", "disconnected"})
"""Outcomes of generations: the only rows that carry per-task state."""
REFUSED = frozenset({"refused_route", "invalid_request", "refused_log", "refused_rate", "refused_budget"})
"""Outcomes of refused requests (free traffic with a row of its own: hcu.gateway.refusals)."""
UNTRACKED = frozenset({"free", "refused_route", "invalid_request", "refused_log", "refused_rate"})
AGGREGATE = "refusals"
"""The outcome of an aggregate row: the refusals of one scope in one interval."""
_GENERATIONS: dict[bytes, str] = {f'outcome":"{o}"'.encode(): o for o in TRACKED - REFUSED}
"""Outcomes of generations that went upstream or held a slot (the bulk of a log), as the writer spells them."""
_UNBUDGETED: dict[bytes, str | None] = {  # None: a free call
    **{f'outcome":"{o}"'.encode(): o for o in REFUSED},
    b'outcome":"free"': None,
}
_ROW_OUTCOMES = TRACKED | UNTRACKED | {AGGREGATE}
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
    scope_bytes: dict[str, int] = field(default_factory=dict)
    """Bytes each scope's rows of requests that used no budget slot take (newline included): what its
    token-log ceiling counts."""
    refusal_bytes: int = 0
    """Bytes rows of refusals and aggregate rows take."""
    refusals: dict[str, Counter[str]] = field(default_factory=dict)
    """Each scope's refusals by kind."""


class _Reader:
    """State while reading, per task key (the raw `task":"<id>"` field): an entry [its state, the raw time,
    upstream and deployment fields of its last row] for scopes that made generations, the bytes of its rows,
    its refusals by kind; decoded once per task at the end."""

    def __init__(self) -> None:
        self.entries: dict[bytes, list] = {}
        self.sizes: dict[bytes, int] = {}
        self.refusals: dict[bytes, Counter[str]] = {}
        self.out = Restored()

    def scan(self, lines: list[bytes]) -> None:
        entries, generations, unbudgeted, counted_of = self.entries, _GENERATIONS, _UNBUDGETED, _COUNTED
        rows = len(lines)
        for line in lines:
            p = line.split(b',"', 11)
            counted = counted_of.get(p[9]) if len(p) == 12 and line[-1:] == b"}" else None
            outcome = generations.get(p[8]) if counted is not None else False
            if outcome is None:  # no generation: a free call, a refusal, or not a row the writer wrote
                outcome = unbudgeted.get(p[8], False)
                if outcome is not False:
                    self.unbudgeted(p[1], outcome, len(line) + 1)
                    if outcome != "refused_budget":
                        continue
            if outcome is False:
                rows -= 1
                if line.strip():
                    self.slow(line)
                continue
            entry = entries.get(p[1])
            if entry is None:
                if not _plain_row(p):
                    rows -= 1
                    self.slow(line, sized=True)
                    continue
                entry = entries[p[1]] = [TaskState(), b"", b"", b""]
            st = entry[0]
            if outcome == "success":  # most rows: TaskState.record's first case, without the call
                st.calls_used += counted
                st.failed_in_a_row = 0
            else:
                st.record(outcome, counted, True)
            if _NO_WAIT not in p[11]:
                _add_wait(st, _wait_of(p[11]))
            entry[1], entry[2], entry[3] = p[0], p[3], p[4]  # the rest of the row is freed now
        self.out.rows += rows

    def unbudgeted(self, key: bytes, outcome: str | None, size: int) -> None:
        """A row of a request that used no budget slot: a free call (outcome None) or a refusal."""
        self.sizes[key] = self.sizes.get(key, 0) + size
        if outcome is not None:
            self.refused(key, outcome, size)

    def refused(self, key: bytes, kind: str, size: int) -> None:
        self.out.refusal_bytes += size
        counts = self.refusals.get(key)
        if counts is None:
            counts = self.refusals[key] = Counter()
        counts[kind] += 1

    def slow(self, line: bytes, *, sized: bool = False) -> None:
        """A row in any JSON layout: checked field by field, skipped when it is not a row. `sized`: the scan
        counted its bytes (and refusal) already."""
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        row = row if isinstance(row, dict) else {}
        task, outcome, counted, at = row.get("task"), row.get("outcome"), row.get("counted"), row.get("time")
        wait = row.get("rate_limit_wait_sec", 0.0)
        if not (isinstance(task, str) and outcome in _ROW_OUTCOMES and isinstance(counted, bool)
                and isinstance(at, (int, float)) and isinstance(wait, (int, float))):
            self.out.skipped += 1
            log.warning("token log: skipping an unreadable line (%d bytes)", len(line))
            return
        self.out.rows += 1
        key = b'task":' + orjson.dumps(task)  # the key a plain row of this task has: task":"<id>"
        if not sized and (outcome == "free" or outcome in REFUSED):
            self.unbudgeted(key, outcome if outcome in REFUSED else None, len(line) + 1)
        refused_budget = 1 if outcome == "refused_budget" else 0
        if outcome == AGGREGATE:
            refused_budget = self.aggregate(key, row.get("refusals"), len(line) + 1)
            if not refused_budget:
                return
        if outcome in UNTRACKED:
            return
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = [TaskState(), b'{"time":' + orjson.dumps(at), b'upstream":null',
                                         b'deployment":null']
        if outcome == AGGREGATE:
            entry[0].refused += refused_budget
            return
        entry[0].record(outcome, counted, generation=True)
        _add_wait(entry[0], float(wait))
        entry[1:] = [b'{"time":' + orjson.dumps(at), b'upstream":' + orjson.dumps(row.get("upstream")),
                     b'deployment":' + orjson.dumps(row.get("deployment"))]

    def aggregate(self, key: bytes, refusals: object, size: int) -> int:
        """Count an aggregate row's refusals; how many of them were generations past the budget."""
        kinds = refusals.get("kinds") if isinstance(refusals, dict) else None
        if not isinstance(kinds, dict):
            log.warning("token log: an aggregate row without its counts (%d bytes)", size)
            kinds = {}
        self.out.refusal_bytes += size
        self.sizes[key] = self.sizes.get(key, 0) + size
        counts = self.refusals.setdefault(key, Counter())
        for kind, count in kinds.items():
            if isinstance(kind, str) and type(count) is int and count > 0:
                counts[kind] += count
        budget = kinds.get("refused_budget")
        return budget if type(budget) is int and budget > 0 else 0

    def result(self) -> Restored:
        out = self.out
        for key, size in self.sizes.items():
            if _is_task_key(key):  # else a row of another layout the fast split took apart wrongly
                out.scope_bytes[_task_of(key)] = size
        for key, counts in self.refusals.items():
            if _is_task_key(key):
                out.refusals[_task_of(key)] = counts
        for key, (st, at, upstream_field, deployment_field) in self.entries.items():
            task = _task_of(key)
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


def _is_task_key(key: bytes) -> bool:
    return key.startswith(b'task":"') and key.endswith(b'"') and len(key) > 7


def _task_of(key: bytes) -> str:
    """The task of a raw `task":"<id>"` key (escapes: slow rows only)."""
    return key[7:-1].decode() if b"\\" not in key else orjson.loads(key[6:])


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
