"""Where hcu keeps host-wide guest state (port leases, overlay registry) shared by all runner processes."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "HCU_STATE_DIR"


def state_dir() -> Path:
    """`$HCU_STATE_DIR`, else `$XDG_STATE_HOME/hcu`, else `~/.local/state/hcu`; created on first use."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        path = Path(configured)
    else:
        path = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "hcu"
    path.mkdir(parents=True, exist_ok=True)
    return path
