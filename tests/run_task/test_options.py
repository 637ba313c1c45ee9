"""run_task's flags: the reference names, defaults, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hcu.osworld.attempt.options import parse_options


def test_reference_flags_parse() -> None:
    o = parse_options(["--benchmark-version", "v1", "--task-id", "t1", "--task-domain", "os",
                       "--guest-image", "/img.qcow2", "--volume-size", "64", "--client-password", "pw",
                       "--agent", "codex", "--model", "gpt-5.4", "--effort", "xhigh", "--max-model-calls", "7",
                       "--token-log", "runs/x.jsonl", "--channels", "a11y,keyboard", "--timeout-seconds", "0"])
    assert (o.task_id, o.agent, o.max_model_calls, o.volume_size) == ("t1", "codex", 7, 64)
    assert o.channels == ["a11y", "keyboard"]
    assert o.guide_path().name == "ax-only.md"
    assert o.timeout_seconds == 0


def test_guide_choice() -> None:
    base = ["--task-id", "t", "--agent", "codex", "--test-desktop"]
    assert parse_options(base).guide_path().name == "hybrid.md"
    assert parse_options(base + ["--channels", "gui,keyboard"]).guide_path().name == "gui-only.md"
    assert parse_options(base + ["--instructions-file", ""]).guide_path() is None
    coded = parse_options(base + ["--code-mode"])
    assert coded.channels[-1] == "code" and coded.test_desktop == "hcu-test-desktop:latest"


@pytest.mark.parametrize("args, flag", [
    (["--agent", "codex"], "--guest-image"),
    (["--agent", "nope", "--test-desktop"], "--agent"),
    (["--agent", "codex", "--test-desktop", "--channels", "gui,mouse"], "--channels"),
    (["--agent", "codex", "--test-desktop", "--max-model-calls", "0"], "--max-model-calls"),
])
def test_bad_flags_are_one_line_exit_2(args: list[str], flag: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.run_task", "--task-id", "t", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for bad input"
