"""With a call-log folder in the agent context, every adapter's rendered MCP server config hands it to
computer-use (HCU_CALL_LOG_DIR in the server's environment); without one, nothing is recorded."""

from __future__ import annotations

import pytest

from hcu.computer_use.call_log import ENV_DIR
from hcu.osworld.agents import AGENT_NAMES, get_adapter
from hcu.osworld.evidence.collect import guest_evidence_dir
from tests.agents.conftest import make_context, require_artifact

# Codex's plan reads the model catalog from the real binary, so its rendering needs the artifact.
AGENTS = [pytest.param(n, marks=pytest.mark.artifacts) if n == "codex" else n for n in AGENT_NAMES]


@pytest.mark.parametrize("name", AGENTS)
def test_the_call_log_folder_reaches_the_rendered_mcp_config(name, artifact_dir):
    if name == "codex":
        require_artifact("codex")
    folder = guest_evidence_dir("/home/user/.hcu")
    plan = get_adapter(name).plan(make_context(call_log_dir=folder), artifact_dir)
    assert plan.mcp_server.env[ENV_DIR] == folder == "/home/user/.hcu/evidence"
    rendered = [f.data.decode() for f in plan.files if f.data and b"mcp" in f.data.lower()]
    assert any(ENV_DIR in text and folder in text for text in rendered), "the CLI starts the server with it"
    quiet = get_adapter(name).plan(make_context(), artifact_dir)
    assert ENV_DIR not in quiet.mcp_server.env
    assert not any(ENV_DIR.encode() in (f.data or b"") for f in quiet.files)
