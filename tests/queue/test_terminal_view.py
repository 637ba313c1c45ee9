"""The terminal view, drawn into a pseudo-terminal by a real queue (the stand-in runner) and read back: at a moment
when nothing moves (launches paused, nothing running), the figures it shows are those of QUEUE_STATUS.md."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading

import pytest

from hcu import REPO_ROOT
from hcu.osworld.queue.snapshot import read_snapshot
from tests.queue.conftest import DRIVER, wait_for
from tests.queue.ctl_session import WAIT_SEC, ctl, held, release, snapshot_when

pytestmark = pytest.mark.docker

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
COLUMNS, ROWS = 220, 60


class Terminal:
    """A pseudo-terminal the queue draws on, and everything drawn on it so far."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.drawn = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.drawn += chunk

    def last_frame(self) -> str:
        """The text of the view as last drawn (the view redraws from its headline down)."""
        text = ANSI.sub("", bytes(self.drawn).decode(errors="replace"))
        return "hcu queue " + text.rsplit("hcu queue ", 1)[-1] if "hcu queue " in text else ""


def figure(frame: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}\s{{2,}}(.+?)\s*$", frame, re.M)
    assert match, f"no {label!r} in the view:\n{frame}"
    return match.group(1)


def test_the_view_shows_the_figures_of_queue_status(make_panel, tmp_path) -> None:
    tasks = [f"t{i}" for i in range(4)]
    panel = make_panel(tasks, max_active_tasks=2, sleep_sec=(0.05, 0.1), scenario=held(tmp_path, tasks))
    run_dir, terminal = panel.run_dir, Terminal()
    env = {**os.environ, "COLUMNS": str(COLUMNS), "LINES": str(ROWS), "TERM": "xterm-256color"}
    queue = subprocess.Popen([sys.executable, str(DRIVER), str(panel.config_path), "--watch"], cwd=REPO_ROOT,
                             stdin=subprocess.DEVNULL, stdout=terminal.slave, stderr=subprocess.PIPE, env=env)
    try:
        snapshot_when(run_dir, lambda s: s.running == 2, "two attempts running")
        assert ctl(run_dir, "pause").returncode == 0
        release(tmp_path, "t0", "t1")
        snapshot = snapshot_when(run_dir, lambda s: s.done == 2 and s.running == 0 and s.paused, "a still moment")
        wait_for(lambda: "launches paused" in terminal.last_frame() and "2 of 4 repeats final" in
                 terminal.last_frame(), WAIT_SEC, "the view to show it")
        frame, status = terminal.last_frame(), (run_dir / "QUEUE_STATUS.md").read_text()
        assert read_snapshot(run_dir) == snapshot, "the figures moved"

        assert figure(frame, "attempts") == "2 of 4 repeats final (2 finished); 0 running, 2 to start"
        assert "| finished | 2 |" in status and "| pending | 2 |" in status and "| active | 0 |" in status
        admission = figure(frame, "admission")
        assert admission == "2 at once (max_active_tasks)"
        assert f"Admission: {admission}." in status
        score = figure(frame, "score so far")
        assert score.startswith("1.000 (95% 0.342 to 1.000, wilson); 2 of 4 repeats scored (50.0% coverage)")
        assert "Score so far: 1.000 over 2 of 4 repeats scored (50.0% coverage; 0 withheld)." in status
        assert figure(frame, "set aside").startswith("0 ") and "## Retries (0)" in status
        assert figure(frame, "running") == "none" and "## Active (0 of 2)" in status
        launches = figure(frame, "launches")
        assert launches.startswith("paused (ctl pause)") and f"Launches {launches}." in status
        assert figure(frame, "cost") == "unknown (the config has no prices)" and "Spend: unknown" in status
        finished = re.findall(r"^\s+\d\d:\d\d:\d\d\s+(t\d) attempt 1: finished, score 1", frame, re.M)
        assert sorted(finished) == sorted(re.findall(r"^\| (t\d) \| 1 \| finished \|", status, re.M)) == ["t0", "t1"]

        assert ctl(run_dir, "resume").returncode == 0
        release(tmp_path, *tasks)
        assert queue.wait(timeout=WAIT_SEC) == 0, queue.stderr.read() if queue.stderr else ""
        wait_for(lambda: "4 of 4 repeats final" in terminal.last_frame(), WAIT_SEC, "the last drawing")
    finally:
        queue.kill()
        queue.wait()
        os.close(terminal.slave)
