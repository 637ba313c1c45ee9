"""The gateway's token log: one JSONL row per client request, appended and flushed per row.

The runner and the summarizer read it with `read_token_log`; the gateway restores its per-task counters from
it on restart. Token counts follow one convention for every provider: `input_tokens` is the whole prompt
(cached part included), `cached_input_tokens` the cached part of it, `output_tokens` everything generated
(reasoning included), `reasoning_tokens` the reasoning part of it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import IO, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

log = logging.getLogger(__name__)

Outcome = Literal["success", "failed", "rate_limited", "refused_budget", "disconnected", "free"]


class TokenUsage(BaseModel):
    """Tokens of one generation, parsed from the upstream's JSON body or stream."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    """Whole prompt, cached part included."""
    cached_input_tokens: int = 0
    output_tokens: int = 0
    """Everything generated, reasoning included."""
    reasoning_tokens: int = 0


class TokenLogRow(BaseModel):
    """One client request as the gateway saw it. Field order is the on-disk order."""

    model_config = ConfigDict(extra="forbid")

    time: float
    """Unix time the request ended."""
    task: str
    """Task scope from the URL (`/t/<task>/...`)."""
    provider: str
    upstream: str | None = None
    """Resource of the last attempt: the upstream host, or the pinned resource behind a relay
    (`--pin-resources`); no credential. None when the upstream was never contacted."""
    deployment: str | None = None
    model: str | None = None
    path: str
    """Path after the task scope, query excluded (queries can carry keys)."""
    status: int
    """HTTP status sent to the client (200 for a stream that later ended in an error event)."""
    outcome: Outcome
    counted: bool
    """True when this request used one call of the task's budget."""
    calls_used: int
    """Task's calls used after this request."""
    usage: TokenUsage | None = None
    latency_sec: float
    ttfb_sec: float | None = None
    """Time to the first byte sent to the client."""
    rate_limit_wait_sec: float = 0.0
    attempts: int = 0
    """Upstream attempts (0 when refused or rejected before forwarding)."""
    upstream_request_id: str | None = None
    response_id: str | None = None


class TokenLog:
    """Append-only writer: one `write` + `flush` per row, so a `kill -9` loses at most a torn last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] = path.open("ab")
        if self._file.tell() > 0 and not _ends_with_newline(path):
            # A torn last line from a crash: end it, so the next row starts on a line of its own.
            self.append_raw(b"\n")

    def append_raw(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    def append_fields(self, fields: dict) -> None:
        """Append a row given as a dict with TokenLogRow's fields (the gateway's hot path)."""
        self.append_raw(orjson.dumps(fields) + b"\n")

    def close(self) -> None:
        self._file.close()


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def read_token_log(path: Path) -> list[TokenLogRow]:
    """All complete rows of a token log; a torn or invalid line (a crash mid-write) is skipped, warned."""
    if not path.exists():
        return []
    rows: list[TokenLogRow] = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(TokenLogRow.model_validate(orjson.loads(line)))
        except (orjson.JSONDecodeError, ValidationError):
            log.warning("token log %s: skipping unreadable line %d", path, number)
    return rows
