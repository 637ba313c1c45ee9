"""The gateway's token log: one JSONL row per client request, appended with one `write` per row.

The runner and the summarizer read it with `read_token_log`; the gateway restores its per-task counters from
it on restart (`hcu.gateway.restore`). Token counts follow one convention for every provider: `input_tokens`
is the whole prompt (cached part included), `cached_input_tokens` the part read from the prompt cache,
`cache_write_input_tokens` the part written to it (Anthropic bills it apart; 0 elsewhere), `output_tokens`
everything generated (reasoning included), `reasoning_tokens` the reasoning part of it.

The log fails closed. A row that cannot be written (disk full, unwritable) stays in memory and is written as
soon as the log can take it again; meanwhile `writable` is False, the gateway refuses new generations and
`/healthz` says why. A log deleted or moved away while the gateway runs is put back at its path from the file
the gateway still holds open; a log replaced by another file or truncated is reported and fails closed.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from hcu.gateway.errors import GatewayProxyError
from hcu.gateway.scope_secret import SECRET_PREFIX, redact_secrets

log = logging.getLogger("hcu.gateway")

Outcome = Literal[
    "success",
    "failed",
    "rate_limited",
    "refused_budget",
    "disconnected",
    "free",
    "refused_route",
    "invalid_request",
    "refused_log",
    "refused_rate",
    "refusals",
]
TORN_LINE_END = b"\t(torn)\n"
"""Ends a line a crash left unfinished, so no reader can take it for a complete row."""
CLIENT_TEXT_FIELDS = ("task", "model", "path", "upstream_request_id", "response_id")
"""Text fields a client or an upstream chooses (the others come from the gateway's own configuration)."""
MAX_PENDING_ROWS = 100_000
"""Rows of uncharged requests kept in memory while the log cannot be written; rows of generations that used
or held a budget slot are always kept."""


class TokenUsage(BaseModel):
    """Tokens of one generation, parsed from the upstream's JSON body or stream. A log row's part: the token log's
    `usage` of each row, the one count every other usage type is made from (result.json's `records.result.Usage`
    sums an attempt's rows)."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    """Whole prompt, cached part included."""
    cached_input_tokens: int = 0
    """The part of the prompt read from the provider's cache."""
    cache_write_input_tokens: int = 0
    """The part of the prompt written to the provider's cache (Anthropic's cache_creation_input_tokens)."""
    output_tokens: int = 0
    """Everything generated, reasoning included."""
    reasoning_tokens: int = 0


class RefusalCount(BaseModel):
    """The refusals of one task scope in one interval that did not get a row of their own."""

    model_config = ConfigDict(extra="forbid")

    count: int
    kinds: dict[str, int]
    """How many of each kind (`refused_route`, `invalid_request`, `refused_budget`, `refused_rate`,
    `refused_flood`, `refused_log`)."""
    first: float
    """Unix time of the first of them."""
    last: float


class TokenLogRow(BaseModel):
    """One client request as the gateway saw it. Field order is the on-disk order (restore reads it)."""

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
    """The model the client asked for (an Azure deployment's own name is in `deployment`)."""
    path: str
    """Path after the task scope, query excluded (queries can carry keys)."""
    status: int
    """HTTP status sent to the client (200 for a stream that later ended in an error event)."""
    outcome: Outcome
    """`success`/`failed`/`rate_limited`/`refused_budget`/`disconnected` for generations; `free` for token
    counting and model listing; `refused_route` for a method or path the gateway does not serve;
    `invalid_request` for a body it refuses; `refused_log` while the token log cannot be written; `refused_rate`
    for a free call past its rate; `refusals` for an aggregate row (`refusals` says how many of which kind)."""
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
    """Upstream attempts, connection retries included (0 when refused or rejected before forwarding)."""
    upstream_request_id: str | None = None
    response_id: str | None = None
    cut_fields: dict[str, int] | None = None
    """The length each text field had before it was cut to the log's limit (a 4 MB `model` costs the log
    256 characters, not 4 MB); absent when nothing was cut."""
    refusals: RefusalCount | None = None
    """Only in an aggregate row (outcome `refusals`): the scope's refusals it stands for. Its `path` and `status`
    are the last refusal's."""


class TokenLog:
    """Append-only writer that never loses a row it was given and never raises on a write."""

    def __init__(self, path: Path, max_field_chars: int) -> None:
        self.path = path
        self.max_field_chars = max_field_chars
        """Text fields longer than this are cut (their length goes into `cut_fields`), so a row is bounded."""
        self.error: str | None = None
        """Why rows are waiting in memory; None while the log is written normally."""
        self.pending: deque[bytes] = deque()
        self.dropped = 0
        """Uncharged rows given up because MAX_PENDING_ROWS were already waiting."""
        self.restored_from_open_file = 0
        """Times the log was put back at its path after being deleted or moved away."""
        self._torn = False
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        opened = os.fstat(self._fd)
        self._identity, self._size = (opened.st_dev, opened.st_ino), opened.st_size
        if self._size and os.pread(self._fd, 1, self._size - 1) != b"\n":
            self._torn = True  # a torn last line from a crash: the next row starts on a line of its own

    @property
    def writable(self) -> bool:
        return self.error is None

    def status(self) -> dict[str, object]:
        """What `/healthz` reports about the log."""
        return {"writable": self.writable, "pending_rows": len(self.pending), "dropped_rows": self.dropped,
                "error": self.error, "restored_from_open_file": self.restored_from_open_file}

    def encode(self, fields: dict) -> bytes:
        """A row given as a dict with TokenLogRow's fields, as one bounded JSONL line (the gateway's hot path)."""
        return orjson.dumps(self.bounded(fields)) + b"\n"

    def append(self, row: bytes, *, charged: bool) -> None:
        """Append an encoded row. `charged`: the request used or held a budget slot, so its row is kept whatever
        happens."""
        if not charged and len(self.pending) >= MAX_PENDING_ROWS:
            self.dropped += 1
            return
        self.pending.append(row)
        self.flush()

    def bounded(self, fields: dict) -> dict:
        """`fields` with every long text cut (lengths in `cut_fields`) and anything shaped like a scope secret
        (a guest may write its own into a path or a model) replaced."""
        limit = self.max_field_chars
        odd = [name for name in CLIENT_TEXT_FIELDS
               if type(value := fields.get(name)) is str and (len(value) > limit or SECRET_PREFIX in value)]
        if not odd:
            return fields
        long = [name for name in odd if len(fields[name]) > limit]
        kept = {**fields, **{name: redact_secrets(fields[name][:limit]) for name in odd}}
        if long:
            kept["cut_fields"] = {name: len(fields[name]) for name in long}
        return kept

    def flush(self) -> bool:
        """Write every waiting row; False (and `error` set) when the log cannot take them now."""
        try:
            self._check_file()
            while self.pending:
                self._write(self.pending[0])
                self.pending.popleft()
        except OSError as exc:
            self._fail(f"cannot write {self.path}: {exc.strerror or exc}")
            return False
        except _Replaced as exc:
            self._fail(str(exc))
            return False
        if self.error is not None:
            log.warning("token log %s is writable again; every waiting row is written", self.path)
            self.error = None
        return True

    def _write(self, row: bytes) -> None:
        data = TORN_LINE_END + row if self._torn else row
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError:
            if written:  # take the fragment back; if even that fails, end it as torn before the next row
                try:
                    os.ftruncate(self._fd, self._size)
                    written = 0
                except OSError:
                    self._torn = True
            raise
        finally:
            self._size += written
        self._torn = False

    def _check_file(self) -> None:
        """The path still names the file we append to, at least as long as we made it."""
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            self._put_back()
            return
        if (at_path.st_dev, at_path.st_ino) != self._identity:
            raise _Replaced(f"{self.path} was replaced by another file while the gateway wrote to it")
        if at_path.st_size < self._size:
            raise _Replaced(f"{self.path} was truncated while the gateway wrote to it")

    def _put_back(self) -> None:
        """The log was deleted or moved away: copy what the open file holds to a new file at the path."""
        temp = self.path.with_name(f".{self.path.name}.restoring")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            offset, size = 0, os.fstat(self._fd).st_size
            while offset < size:
                sent = os.sendfile(fd, self._fd, offset, size - offset)
                if sent == 0:
                    break
                offset += sent
            os.link(temp, self.path)
        except BaseException:
            os.close(fd)
            raise
        finally:
            temp.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        os.close(fd)
        opened = os.fstat(self._fd)
        self._identity = (opened.st_dev, opened.st_ino)
        self.restored_from_open_file += 1
        log.warning("token log %s was deleted or moved while in use; put back from the open file", self.path)

    def _fail(self, reason: str) -> None:
        if self.error != reason:
            log.error("token log: %s; %d rows wait in memory and generations are refused", reason,
                      len(self.pending))
        self.error = reason

    def close(self) -> None:
        self.flush()
        os.close(self._fd)


class _Replaced(GatewayProxyError):
    """The path names another file than the one the gateway writes, or a shorter one."""


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
