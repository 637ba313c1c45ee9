"""run_task's flags: the reference names, defaults, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hcu.defaults import BENCHMARKS, GUEST
from hcu.osworld.agents import agent_cli
from hcu.osworld.attempt.options import parse_options, parser
from hcu.osworld.run_config import RunConfig
from hcu.osworld.settings import AttemptSettings


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
    assert coded.code_mode and coded.test_desktop is True
    assert coded.resolved(Path.cwd(), lambda: "10.0.0.1").test_desktop == GUEST.test_desktop_image


def test_resolved_options_fill_every_default_from_the_registries() -> None:
    o = parse_options(["--task-id", "t", "--agent", "gemini-cli", "--guest-image", "img.qcow2",
                       "--benchmark-version", "v2"]).resolved(Path("/base"), lambda: "10.0.0.1")
    agent, version = agent_cli("gemini-cli"), BENCHMARKS["v2"]
    assert (o.model, o.effort, o.gateway) == (agent.model, agent.effort, f"http://10.0.0.1:{agent.gateway_port}")
    assert (o.client_password, o.volume_size) == (version.client_password, version.volume_size)
    assert o.guest_image == Path("/base/img.qcow2") and o.agent_binary == o.artifact_dir / "gemini-cli.tgz"


def test_flags_and_config_keys_come_from_the_same_fields() -> None:
    """Every attempt setting is a run_task flag and a run config key, with one default."""
    flags = {action.dest for action in parser()._actions}
    assert set(AttemptSettings.model_fields) <= flags
    assert set(AttemptSettings.model_fields) <= set(RunConfig.model_fields)
    for name, field in AttemptSettings.model_fields.items():
        assert RunConfig.model_fields[name].default == field.default, name


@pytest.mark.parametrize("args, flag", [
    (["--agent", "codex"], "--guest-image"),
    (["--agent", "nope", "--test-desktop"], "--agent"),
    (["--agent", "codex", "--test-desktop", "--channels", "gui,mouse"], "--channels"),
    (["--agent", "codex", "--test-desktop", "--max-model-calls", "-1"], "--max-model-calls"),
    (["--agent", "codex", "--test-desktop", "--ram-size", "8192"], "--ram-size"),
])
def test_bad_flags_are_one_line_exit_2(args: list[str], flag: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.run_task", "--task-id", "t", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir()), "nothing is written for bad input"
