"""Versioned pydantic records and the one way they reach disk: atomically (temp file + rename)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import orjson
from filelock import FileLock
from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """Base of every record hcu writes. Unknown fields are refused so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1


R = TypeVar("R", bound=BaseModel)


HASH_CHUNK_BYTES = 8 << 20


def sha256_of_file(path: Path) -> str:
    """sha256 of a file of any size, read in chunks (hashlib.file_digest is Python 3.11+)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path, cache_path: Path) -> str:
    """sha256 of a (possibly 25 GB) file, read in chunks and cached by (path, size, mtime)."""
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    with FileLock(str(cache_path) + ".lock"):
        cache = orjson.loads(cache_path.read_bytes()) if cache_path.exists() else {}
        if key in cache:
            return str(cache[key])
    digest = sha256_of_file(path)
    with FileLock(str(cache_path) + ".lock"):
        cache = orjson.loads(cache_path.read_bytes()) if cache_path.exists() else {}
        cache[key] = digest
        write_json(cache_path, cache)
    return digest


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a torn one."""
    write_atomic_chunks(path, (data,))


def write_atomic_chunks(path: Path, chunks: Iterable[bytes]) -> int:
    """`write_atomic` for data that arrives in pieces (a download): nothing is at `path` until the last piece
    is written; a failure while reading `chunks` leaves the old file. Returns the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    size = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return size


def write_record(path: Path, record: BaseModel) -> None:
    """Write a pydantic record as indented JSON, atomically."""
    write_atomic(path, orjson.dumps(record.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n")


def write_json(path: Path, value: object) -> None:
    """Write a plain JSON value, atomically."""
    write_atomic(path, orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")


def read_record(path: Path, cls: type[R]) -> R:
    """Read and validate a record written by `write_record`."""
    return cls.model_validate(orjson.loads(path.read_bytes()))


class GrowingFile:
    """An append-only line file (a JSONL log) read as it grows: each `read` returns the complete lines added since
    the last (a torn last line waits for its end), and says when the file was replaced or cut, so the reader starts
    over from what `read` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None
        self.offset = 0
        """Bytes of complete lines read so far."""

    def read(self) -> tuple[bool, bytes]:
        """(restarted, the complete lines added): `restarted` when the file is new to this reader, or was replaced
        or cut since the last read (the lines returned are then the file's from its start). A missing file reads as
        nothing added."""
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                restarted = (stat.st_dev, stat.st_ino) != self.identity or stat.st_size < self.offset
                if restarted:
                    self.identity, self.offset = (stat.st_dev, stat.st_ino), 0
                f.seek(self.offset)
                data = f.read(stat.st_size - self.offset)
        except FileNotFoundError:
            return False, b""
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return restarted, complete
