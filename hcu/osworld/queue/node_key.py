"""The run's scope key on the nodes of a Ray cluster (per-task secrets, hcu/gateway/scope_secret.py).

An attempt's secret is an HMAC of its scope under the run's key, so every node's gateway and every runner on
that node must hold the key of the run's key file (`scope_key_file`, on the head). The head reads it once
(creating it if the run has none yet, as a local run's gateway or runner would) and ships it the way the
attempts' results travel:

- with `ray.shared_dir`: as a file beside the nodes' attempts in the shared directory, read there in place;
  nothing of the key goes through Ray;
- otherwise through Ray, as an argument of each attempt's start call (never a command line, the config, a log
  or a result), and the run's agent on the node writes it to the node's own copy in its hcu state directory.

Either file is mode 0600 and the runners and the node's gateway get only its path (`--scope-key-file`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from hcu.gateway.scope_secret import ScopeKeyError, load_or_create_key
from hcu.osworld.queue.node_gateway import NodeGatewayError
from hcu.osworld.records.layout import SCOPE_KEY_FILE
from hcu.record_io import write_atomic


@dataclass(frozen=True)
class ShippedKey:
    """The run's key on its way to a node through Ray; its repr hides it."""

    key: bytes = field(repr=False)


def ship_key(key_file: Path | None, shared_root: Path | None) -> ShippedKey | None:
    """On the head: what each start call carries (None without per-task secrets, or with a shared directory,
    `shared_root` being the run's folder there: the key is written there now). Raises ScopeKeyError."""
    if key_file is None:
        return None
    key = load_or_create_key(key_file)
    if shared_root is None:
        return ShippedKey(key)
    write_key(shared_root / SCOPE_KEY_FILE, key)
    return None


def node_key_file(root: Path, shipped: ShippedKey | None, secrets_on: bool) -> Path | None:
    """On a node: the run's key file there, the shipped key written to it first (None: per-task secrets off).
    `root` is the run's folder on the node (the shared directory's, when the key was not shipped)."""
    if not secrets_on:
        return None
    path = root / SCOPE_KEY_FILE
    try:
        if shipped is not None:
            write_key(path, shipped.key)
        elif not path.is_file():
            raise NodeGatewayError(f"ray.shared_dir: the run's scope key {path} is missing on node "
                                   f"{socket.gethostname()} (is the shared directory mounted at the same path?)")
    except ScopeKeyError as exc:
        raise NodeGatewayError(f"scope key on node {socket.gethostname()}: {exc}") from None
    return path


def write_key(path: Path, key: bytes) -> None:
    """Write the key where it is not already (mode 0600, atomically: a runner never reads half a key)."""
    text = key.hex() + "\n"
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass  # not there yet
    try:
        write_atomic(path, text.encode())  # its temporary file, and so the key file, is created 0600
    except OSError as exc:
        raise ScopeKeyError(f"cannot write {path} ({exc.strerror})") from None


def remove_key(root: Path) -> None:
    """The run is over: its key copy goes."""
    (root / SCOPE_KEY_FILE).unlink(missing_ok=True)
