"""A Ray node's gateway for each registered agent (no cluster needed): its provider's module, port flag and
credential variable, as the agent's adapter and the provider's descriptor declare them."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.osworld.agents import AGENT_NAMES, agent_cli
from hcu.osworld.queue.node_gateway import gateway_command, gateway_environment, without_upstream_credentials
from hcu.osworld.run_config import load_config

TOKEN_ENV = "HCU_TEST_NODE_GATEWAY_UPSTREAM"


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_each_agent_s_node_gateway_is_its_provider_s(agent: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"agent": agent, "test_desktop": True, "tasks": ["a"], "results_dir": str(tmp_path / "runs"),
            "executor": "ray", "ray": {"address": "10.0.0.5:6379", "node_gateway": {
                "upstream_args": ["--flag-of-the-upstream"], "upstream_token_env": TOKEN_ENV}}}
    (tmp_path / "run.json").write_bytes(orjson.dumps(body))
    config, provider = load_config(tmp_path / "run.json"), agent_cli(agent).provider
    argv = gateway_command(config, "172.17.0.1", 8000, tmp_path / "tokens.jsonl", None)
    assert argv[1:3] == ["-m", provider.module] and argv[argv.index(provider.port_flag) + 1] == "8000"
    monkeypatch.setenv(TOKEN_ENV, "sk-node-credential")
    assert gateway_environment(config)[provider.token_env] == "sk-node-credential"
    assert without_upstream_credentials(config, {provider.token_env: "x", TOKEN_ENV: "y", "KEEP": "1"}) == {"KEEP": "1"}
