"""A QEMU guest's control folder: a host folder bind-mounted into its container, where QEMU opens its monitor socket
(monitor.py) so that hcu reaches it without `docker exec`.

It lives under the state dir on a short path (a unix socket's path is limited to 107 bytes; an attempt's result
folder can be longer) named by a digest of its owner, with its owner and labels written inside before anything
else, so `cleanup` finds it after a crash as it finds overlays.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from pydantic import BaseModel

from hcu.osworld.guest.state_dir import pid_alive, state_dir

OWNER_FILE = "owner.json"
CONTAINER_PATH = "/hcu-control"
"""Where the folder is mounted in the guest's container."""


class ControlEntry(BaseModel):
    owner: str
    labels: dict[str, str]


def _root() -> Path:
    path = state_dir() / "control"
    path.mkdir(exist_ok=True)
    return path


def folder_of(owner: str) -> Path:
    return _root() / hashlib.sha256(owner.encode()).hexdigest()[:16]


def create(owner: str, labels: dict[str, str]) -> Path:
    """The owner's control folder, registered with its labels: made under a name of its own and renamed into
    place with its owner file, so no folder is ever seen without one."""
    remove(owner)
    folder = folder_of(owner)
    making = folder.with_name(f".{folder.name}.{os.getpid()}")
    shutil.rmtree(making, ignore_errors=True)
    making.mkdir()
    (making / OWNER_FILE).write_text(ControlEntry(owner=owner, labels=labels).model_dump_json())
    making.rename(folder)
    return folder


def remove(owner: str) -> Path | None:
    folder = folder_of(owner)
    if not folder.exists():
        return None
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def remove_matching(labels: dict[str, str]) -> list[Path]:
    """Remove every control folder whose labels include all of `labels`, and any a killed process left half made."""
    removed = []
    for folder in sorted(_root().iterdir()):
        if folder.name.startswith("."):
            if not pid_alive(int(folder.name.rsplit(".", 1)[-1])):
                shutil.rmtree(folder, ignore_errors=True)
            continue
        entry = ControlEntry.model_validate_json((folder / OWNER_FILE).read_bytes())
        if labels.items() <= entry.labels.items():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
