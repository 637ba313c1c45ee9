"""The run's scope key on Ray nodes (no cluster needed): shipped through Ray or a shared directory, written on
the node as a 0600 file the runner's credential and the gateway agree on, never in a command line or the
node gateway's argv; the upstream credential only in the gateway's environment."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from hcu.gateway.scope_secret import key_id, load_or_create_key
from hcu.osworld.attempt.scope_credential import gateway_credential
from hcu.osworld.queue.gate import launch_gate
from hcu.osworld.queue.node_gateway import (
    NodeGatewayError,
    gateway_command,
    gateway_environment,
    without_upstream_credentials,
)
from hcu.osworld.queue.node_key import ShippedKey, node_key_file, remove_key, ship_key
from hcu.osworld.records.layout import SCOPE_KEY_FILE
from hcu.osworld.run_config import load_config

TOKEN_ENV = "HCU_TEST_NODE_KEY_UPSTREAM"


def ray_config(tmp_path: Path, **ray: object):
    body = {"benchmark_version": "v1", "agent": "codex", "test_desktop": True, "tasks": ["a"],
            "results_dir": str(tmp_path / "runs"), "executor": "ray",
            "ray": {"address": "10.0.0.5:6379", **ray}}
    path = tmp_path / "ray-run.json"
    path.write_bytes(orjson.dumps(body))
    return load_config(path)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_through_ray_the_node_copy_issues_the_secrets_the_head_key_does(tmp_path: Path):
    config = ray_config(tmp_path)
    assert config.scope_key_file == config.run_dir / "gateway-scope.key"
    shipped = ship_key(config.scope_key_file, None)
    assert shipped is not None and mode(config.scope_key_file) == 0o600, "the head creates the run's key"
    assert shipped.key.hex() not in repr(shipped)

    node_root = tmp_path / "node-state" / "ray" / str(config.run_id)
    copy = node_key_file(node_root, shipped, secrets_on=True)
    assert copy == node_root / SCOPE_KEY_FILE and mode(copy) == 0o600
    scope = f"{config.run_id}/a.a1"
    head, node = gateway_credential(config.scope_key_file, scope), gateway_credential(copy, scope)
    assert (node.token, node.key_id) == (head.token, head.key_id)

    other = ShippedKey(bytes(range(32)))  # a run whose key file was replaced: the node's copy follows it
    node_key_file(node_root, other, secrets_on=True)
    assert key_id(load_or_create_key(copy)) == key_id(other.key)
    remove_key(node_root)
    assert not copy.exists()


def test_through_a_shared_directory_nothing_is_shipped_and_the_nodes_read_the_head_copy(tmp_path: Path):
    config = ray_config(tmp_path, shared_dir=str(tmp_path / "shared"))
    shared_root = tmp_path / "shared" / str(config.run_id)
    assert ship_key(config.scope_key_file, shared_root) is None
    copy = node_key_file(shared_root, None, secrets_on=True)
    assert copy == shared_root / SCOPE_KEY_FILE and mode(copy) == 0o600
    assert copy.read_text() == config.scope_key_file.read_text()

    elsewhere = tmp_path / "not-mounted"
    with pytest.raises(NodeGatewayError, match="ray.shared_dir: the run's scope key .* is missing on node"):
        node_key_file(elsewhere, None, secrets_on=True)
    assert not (elsewhere / SCOPE_KEY_FILE).exists(), "a node never invents a key of its own"


def test_without_per_task_secrets_no_key_goes_anywhere(tmp_path: Path):
    assert ship_key(None, None) is None
    assert node_key_file(tmp_path, None, secrets_on=False) is None
    assert list(tmp_path.iterdir()) == []


def test_node_gateway_gets_the_key_file_and_its_credential_only_through_its_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = ray_config(tmp_path, node_gateway={"upstream_args": ["--upstreams", "h", "--upstream-kind", "openai"],
                                                "upstream_token_env": TOKEN_ENV})
    monkeypatch.setenv(TOKEN_ENV, "sk-node-credential")
    key_file = tmp_path / SCOPE_KEY_FILE
    argv = gateway_command(config, "172.17.0.1", 8611, tmp_path / "tokens.jsonl", key_file)
    assert argv[argv.index("--scope-key-file") + 1] == str(key_file)
    assert "sk-node-credential" not in " ".join(argv) and "--upstream-token" not in argv
    assert gateway_environment(config)["OSW_OPENAI_UPSTREAM_TOKEN"] == "sk-node-credential"

    monkeypatch.setenv("OSW_OPENAI_UPSTREAM_TOKEN", "sk-gateway-variable")
    runner_env = without_upstream_credentials(config, {**os.environ, "KEEP": "1"})
    assert TOKEN_ENV not in runner_env and "OSW_OPENAI_UPSTREAM_TOKEN" not in runner_env
    assert runner_env["KEEP"] == "1"

    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(NodeGatewayError, match=f"upstream_token_env: {TOKEN_ENV} is not set on node"):
        gateway_environment(config)


def test_the_head_holds_no_launch_gate_for_ray(tmp_path: Path):
    """The local gate would check `gateway` from the head; on Ray each runner's probe checks its own."""
    assert launch_gate(ray_config(tmp_path)) is None
    assert launch_gate(ray_config(tmp_path).model_copy(update={"executor": "local", "ray": None})) is not None
