"""The agent registry is the one source of what hcu knows about an agent CLI: every adapter declares it, and the
settings, a run's defaults, isolation and the fetch step all read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.gateway.descriptors import PROVIDERS
from hcu.osworld.agents import ADAPTERS, AGENT_NAMES, ARTIFACTS, INHERITED_PATHS, MANAGED_CONFIG, AgentName
from hcu.osworld.attempt.options import parse_options
from hcu.osworld.run_config import ConfigError, load_config


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_every_adapter_declares_its_cli(name: str) -> None:
    cli = ADAPTERS[name].cli
    assert cli.name == name and PROVIDERS[cli.provider.name] is cli.provider
    assert cli.model and cli.effort and cli.gateway_port == cli.provider.default_port
    assert cli.artifacts and cli.inherited_paths
    for artifact in cli.artifacts:
        assert artifact.source in ("npm", "pypi") and artifact.version in artifact.spec and artifact.member
    # names relative to a home or working directory, folders under /etc: nothing else is removed
    assert all("/" not in path and path not in (".", "..") for path in cli.inherited_paths)
    assert all(path.startswith("/etc/") and ".." not in path for path in cli.managed_config)


def test_settings_isolation_and_fetch_read_the_registry() -> None:
    assert get_args(AgentName) == AGENT_NAMES == tuple(ADAPTERS)
    declared = [adapter.cli for adapter in ADAPTERS.values()]
    assert set(INHERITED_PATHS) >= {path for cli in declared for path in cli.inherited_paths}
    assert set(MANAGED_CONFIG) == {path for cli in declared for path in cli.managed_config}
    assert {artifact.name for artifact in ARTIFACTS} == {a.name for cli in declared for a in cli.artifacts}


def test_the_fetch_step_lists_exactly_the_declared_recipes() -> None:
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.agents.fetch", "--list"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    listed = [orjson.loads(line) for line in out.stdout.splitlines()]
    declared = [a for adapter in ADAPTERS.values() for a in adapter.cli.artifacts]
    assert [(r["name"], r["spec"], r["member"]) for r in listed] == [(a.name, a.spec, a.member) for a in declared]


def test_the_fetch_script_runs_the_registry_s_fetch_step() -> None:
    """scripts/fetch-agents.sh holds no recipe of its own: `make agents` fetches what the adapters declare."""
    script = (REPO_ROOT / "scripts" / "fetch-agents.sh").read_text()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    assert "-m hcu.osworld.agents.fetch" in code
    assert not any(a.version in code or a.name in code.split() for a in ARTIFACTS)


def test_run_task_refuses_an_unknown_agent_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_options(["--task-id", "t", "--agent", "cursor", "--test-desktop"])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err
    assert "--agent: Input should be " in err and all(f"'{name}'" in err for name in AGENT_NAMES)


def test_a_run_config_refuses_an_unknown_agent_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps({"agent": "cursor", "tasks": ["a"], "test_desktop": True}))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).count("\n") == 0 and "agent: Input should be 'codex'" in str(error.value)
