"""Where hcu keeps host-wide guest state (port leases, overlay registry, memory reservations) shared by all
runner processes, and the one way a table of it is read and rewritten: under its lock."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import orjson
from filelock import FileLock
from pydantic import BaseModel

from hcu.record_io import write_json

STATE_DIR_ENV = "HCU_STATE_DIR"
LOCK_TIMEOUT_SEC = 30.0
M = TypeVar("M", bound=BaseModel)


def state_dir() -> Path:
    """`$HCU_STATE_DIR`, else `$XDG_STATE_HOME/hcu`, else `~/.local/state/hcu`; created on first use."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        path = Path(configured)
    else:
        path = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "hcu"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def locked_table(name: str, model: type[M]) -> Iterator[dict[str, M]]:
    """The table `<state dir>/<name>` (owner -> entry), locked for the duration of the block and written back,
    atomically, when the block ends without an exception."""
    path = state_dir() / name
    with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_SEC):
        raw = orjson.loads(path.read_bytes()) if path.exists() else {}
        table = {owner: model.model_validate(entry) for owner, entry in raw.items()}
        yield table
        write_json(path, {owner: entry.model_dump(mode="json") for owner, entry in table.items()})


def drop_matching(name: str, model: type[M], labels: dict[str, str]) -> list[str]:
    """Drop every entry of the table whose `labels` include all of `labels`; returns their owners."""
    with locked_table(name, model) as table:
        owners = [owner for owner, entry in table.items() if labels.items() <= entry.labels.items()]
        for owner in owners:
            del table[owner]
        return owners


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
