"""Bringing an attempt that ran on a Ray node into the run directory, so the run looks as if it ran locally.

On the node: the attempt's result directory as a tar (or left in place on a shared directory), its runner log,
and its rows of the node's token log. On the head: the rows appended to the run's token log once per attempt
scope (a head restarted mid-merge merges again without doubling rows), the runner log appended to
logs/<task>.log, and the files moved into tasks/<task>/ with result.json last, so a half-merged attempt never
reads as finished. Hidden entries (the guest's scratch `.guest`, OSWorld's download cache) stay on the node.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

import orjson

from hcu.osworld.records.layout import RESULT_FILE
from hcu.record_io import write_atomic

INCOMING = ".incoming"


def pack_attempt(result_dir: Path) -> bytes:
    """The attempt's evidence and records as a gzipped tar (hidden entries left out)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in sorted(result_dir.iterdir()):
            if not entry.name.startswith("."):
                tar.add(entry, arcname=entry.name)
    return buffer.getvalue()


def scope_rows(token_log: Path, scope: str) -> bytes:
    """The token-log lines of one attempt scope, as written (a torn last line is left out)."""
    if not token_log.exists():
        return b""
    kept = []
    for line in token_log.read_bytes().splitlines():
        try:
            if orjson.loads(line).get("task") == scope:
                kept.append(line + b"\n")
        except (orjson.JSONDecodeError, AttributeError):
            continue
    return b"".join(kept)


def merged_scopes(token_log: Path | None) -> set[str]:
    """Scopes whose rows the run's token log already holds."""
    if token_log is None or not token_log.exists():
        return set()
    scopes = set()
    for line in token_log.read_bytes().splitlines():
        try:
            scopes.add(str(orjson.loads(line)["task"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return scopes


def append_rows(token_log: Path, rows: bytes, scope: str, merged: set[str]) -> None:
    """Append one attempt's rows to the run's token log, unless they are there already."""
    if not rows or scope in merged:
        return
    token_log.parent.mkdir(parents=True, exist_ok=True)
    with token_log.open("ab") as f:
        if f.tell() > 0 and not _ends_with_newline(token_log):
            f.write(b"\n")
        f.write(rows)
        f.flush()
        os.fsync(f.fileno())
    merged.add(scope)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def unpack_into(task_dir: Path, packed: bytes | None, shared: Path | None) -> None:
    """Move the attempt's files into `task_dir`: everything else first, result.json last."""
    incoming = task_dir / INCOMING
    shutil.rmtree(incoming, ignore_errors=True)
    if packed is not None:
        _extract(packed, incoming)
    elif shared is not None:
        shutil.copytree(shared, incoming, ignore=shutil.ignore_patterns(".*"))
    entries = sorted(incoming.iterdir(), key=lambda entry: entry.name == RESULT_FILE)
    for entry in entries:
        target = task_dir / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    incoming.rmdir()


def _extract(packed: bytes, dest: Path) -> None:
    """Regular files and folders only, never outside `dest` (the tar comes from another machine)."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = PurePosixPath(member.name)
            if name.is_absolute() or ".." in name.parts:
                continue
            path = dest.joinpath(*name.parts)
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None
                write_atomic(path, source.read())


def append_log(log_path: Path, text: bytes) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as f:
        f.write(text)
