"""run_task's options: the attempt settings (`hcu.osworld.settings`) plus which task and where results go, as
flags derived from the same fields a run config has."""

from __future__ import annotations

import argparse
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from hcu import REPO_ROOT
from hcu.flags import OneLineParser, add_flags, parse_flags
from hcu.osworld.settings import SAFE_NAME, AttemptSettings


class RunTaskOptions(AttemptSettings):
    task_id: str = Field(pattern=SAFE_NAME)
    """The OSWorld task id."""
    run_id: str = Field(default_factory=lambda: standalone_run_id(), pattern=SAFE_NAME)
    """Names the attempt (labels, gateway scope, containers) together with task_id and attempt; default a new
    `single-<time>-<random>` per run, so two standalone runs never share a scope, a container or a port."""
    attempt: int = Field(default=1, ge=1)
    """The attempt number (the queue counts infrastructure retries)."""
    repeat: int = Field(default=1, ge=1)
    """Which scored run of the task this is (the queue's `repeats`); each repeat has its own attempts."""
    result_dir: Path | None = None
    """Default runs/single/<task>-<agent>-<run id>/."""

    def resolved_result_dir(self) -> Path:
        if self.result_dir is not None:
            return self.result_dir
        return REPO_ROOT / "runs" / "single" / f"{self.task_id}-{self.agent}-{self.run_id}"


def standalone_run_id() -> str:
    """A run id of its own for a run_task started by hand (the queue passes its run's id)."""
    return f"single-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m hcu.osworld.run_task", description="Run one OSWorld task in a fresh guest.")
    add_flags(p, RunTaskOptions)
    return p


def parse_options(argv: Sequence[str] | None = None) -> RunTaskOptions:
    """Parse and validate; a bad value exits 2 with one line naming the flag."""
    return parse_flags(RunTaskOptions, argv, parser())
