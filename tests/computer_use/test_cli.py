"""Command-line errors of the server and the probe: one line naming the flag, exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hcu.computer_use.channels import parse_channels


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("flags", "named"), [
    (["--channels", "gui,mouse"], "--channels"),
    (["--channels", ","], "--channels"),
    (["--max-screenshot-width", "10"], "--max-screenshot-width"),
    (["--tool-limit-sec", "0"], "--tool-limit-sec"),
])
def test_server_flags_are_checked(flags: list[str], named: str) -> None:
    proc = run("-m", "hcu.computer_use", *flags, "--list-tools")
    assert proc.returncode == 2 and named in proc.stderr and "Traceback" not in proc.stderr


def test_code_mode_adds_the_code_channel_in_canonical_order() -> None:
    assert parse_channels("keyboard,gui", code_mode=True) == ("gui", "keyboard", "code")
    proc = run("-m", "hcu.computer_use", "--channels", "a11y", "--code-mode", "--list-tools")
    assert proc.stdout.split() == ["apps", "observe", "find", "act", "set_text", "run_shell", "run_python"]


def test_probe_spec_is_checked() -> None:
    proc = run("-m", "hcu.computer_use", "probe", "--spec", '{"args": []}')
    assert proc.returncode == 2 and "command" in proc.stderr and "Traceback" not in proc.stderr
    proc = run("-m", "hcu.osworld.attempt.mcp_probe", "--container", "x", "--command", "c", "--env", "NOEQUALS")
    assert proc.returncode == 2 and "--env" in proc.stderr and "Traceback" not in proc.stderr
