"""Driving a real queue (the stand-in runner) with `python -m hcu.osworld.ctl` from a test: the queue in its own
process, attempts held until the test releases them (the stand-in's wait_file), ctl as the operator runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from hcu import REPO_ROOT
from hcu.osworld.queue.snapshot import QueueSnapshot, read_snapshot
from tests.queue.conftest import DRIVER, Panel, wait_for

WAIT_SEC = 60.0


def ctl(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.ctl", str(run_dir), *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def start_queue(panel: Panel, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(DRIVER), str(panel.config_path), *flags], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def held(panel_dir: Path, tasks: list[str]) -> dict[str, Any]:
    """The stand-in scenario entries that hold each task's attempts until `release` is called for it."""
    return {"wait_file": {task: str(panel_dir / f"release-{task}") for task in tasks}}


def release(panel_dir: Path, *tasks: str) -> None:
    for task in tasks:
        (panel_dir / f"release-{task}").touch()


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "logs" / "queue.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def after(run_dir: Path, event: dict[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    """The events of `kind` logged after `event` (all of them for None)."""
    seen = event is None
    found = []
    for e in events(run_dir):
        if seen and e["event"] == kind:
            found.append(e)
        seen = seen or e == event
    return found


def control_event(run_dir: Path, command: str) -> dict[str, Any]:
    return [e for e in events(run_dir) if e["event"] == "control" and e["command"] == command][-1]


def snapshot_when(run_dir: Path, holds, what: str) -> QueueSnapshot:
    """The queue's figures, once `holds(figures)` is true of them."""
    wait_for(lambda: (s := read_snapshot(run_dir)) is not None and holds(s), WAIT_SEC, what)
    snapshot = read_snapshot(run_dir)
    assert snapshot is not None
    return snapshot
