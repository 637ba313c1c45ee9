"""Fixtures for the agent adapter tests: a task context, the artifacts directory, recorded CLI output."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.osworld import agents
from hcu.osworld.agents.base import AgentContext

FIXTURES = Path(__file__).parent / "fixtures"
ARTIFACTS = REPO_ROOT / "artifacts"
FAKE_SECRETS = {
    "OPENAI_API_KEY": "sk-hcu-test-secret-openai",
    "ANTHROPIC_API_KEY": "sk-ant-hcu-test-secret",
    "GEMINI_API_KEY": "hcu-test-secret-gemini",
    "XAI_API_KEY": "xai-hcu-test-secret",
    "OSW_ANTHROPIC_UPSTREAM_TOKEN": "hcu-test-secret-upstream",
}


def make_context(**overrides: object) -> AgentContext:
    fields: dict[str, object] = dict(
        scope="task-1.a1", gateway_url="http://172.17.0.1:8611", model="m-1", effort="high",
        channels=["gui", "a11y", "keyboard"], base_instructions="BASE: act carefully.",
        profile_instructions="PROFILE: observe, act, verify.",
        prompt="Rename the file.\nEnd with TASK_COMPLETE.",
        session_id=str(uuid.uuid4()),
    )
    fields.update(overrides)
    return AgentContext(**fields)


@pytest.fixture
def ctx() -> AgentContext:
    return make_context()


@pytest.fixture
def artifact_dir(tmp_path: Path) -> Path:
    """Stand-in files for every agent artifact (rendering only checks they exist), except Codex, whose plan
    reads the model catalog from the real binary: it is linked from artifacts/ when there."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    for name in {artifact.name for artifact in agents.ARTIFACTS} - {"codex"}:
        (folder / name).write_bytes(b"stand-in")
    if (ARTIFACTS / "codex").is_file():
        (folder / "codex").symlink_to(ARTIFACTS / "codex")
    return folder


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Real-looking provider credentials in the host environment: none may reach a rendered plan."""
    for name, value in FAKE_SECRETS.items():
        monkeypatch.setenv(name, value)
    return FAKE_SECRETS


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def require_artifact(name: str) -> Path:
    path = ARTIFACTS / name
    assert path.is_file(), f"{path} is missing: run `bash scripts/fetch-agents.sh artifacts` first"
    return path
