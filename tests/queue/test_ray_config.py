"""The executor keys of a run config: ray settings required with executor ray, hcu's own gateway flags and
credentials refused without echoing them, the dry run's plan; the local executor never imports Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.run_config import HCU_GATEWAY_FLAGS, load_config

GATEWAY = {"upstream_args": ["--upstreams", "example.openai.azure.com", "--upstream-kind", "azure"]}


def write(tmp_path: Path, **body: object) -> Path:
    base = {"benchmark_version": "v1", "agent": "codex", "test_desktop": True, "tasks": ["a"],
            "results_dir": str(tmp_path / "runs")}
    path = tmp_path / "ray-run.json"
    path.write_bytes(orjson.dumps({**base, **body}))
    return path


def run_queue_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("body, names", [
    ({"executor": "ray"}, 'ray: expected the ray settings exactly when executor is "ray"'),
    ({"ray": {"address": "auto"}}, 'ray: expected the ray settings exactly when executor is "ray"'),
    ({"executor": "ray", "ray": {}}, "ray.address: missing (required)"),
    ({"executor": "ray", "ray": {"address": "auto", "node_gateway": GATEWAY}, "gateway": "http://10.0.0.1:1"},
     "gateway: not used with ray.node_gateway"),
    ({"executor": "ray", "ray": {"address": "auto", "node_gateway": {"upstream_args": ["--out", "x"]}}},
     "ray.node_gateway.upstream_args: --out is set by hcu on each node"),
    ({"executor": "ray", "ray": {"address": "auto", "node_gateway": {"upstream_args": ["--scope-key-file=k"]}}},
     "ray.node_gateway.upstream_args: --scope-key-file is set by hcu on each node"),
])
def test_bad_executor_keys_are_one_line_exit_2(tmp_path: Path, body: dict, names: str):
    out = run_queue_cli(str(write(tmp_path, **body)))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and names in out.stderr, out.stderr


def test_hcu_s_own_gateway_flags_are_those_every_run_fills_the_ports_and_the_token() -> None:
    fills = {"--host", "--out", "--max-requests-per-task", "--scope-key-file", "--port", "--ports", "--upstream-token"}
    assert fills == HCU_GATEWAY_FLAGS


def test_a_token_in_the_gateway_flags_is_refused_without_echoing_it(tmp_path: Path):
    secret = "sk-live-do-not-print"
    gateway = {"upstream_args": ["--upstreams", "h", f"--upstream-token={secret}"]}
    out = run_queue_cli(str(write(tmp_path, executor="ray", ray={"address": "auto", "node_gateway": gateway})))
    assert out.returncode == 2 and "--upstream-token is set by hcu" in out.stderr
    assert secret not in out.stdout + out.stderr


def test_dry_run_of_a_ray_config_describes_nodes_and_imports_no_ray(tmp_path: Path):
    gateway = {**GATEWAY, "upstream_token_env": "AZURE_OPENAI_KEY"}
    path = write(tmp_path, executor="ray", ray={"address": "10.0.0.5:6379", "node_gateway": gateway})
    config = load_config(path)
    assert config.gateway is None and config.ray is not None and config.ray.slot_resource == "hcu_guest_slot"
    out = run_queue_cli(str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "executor: ray (cluster 10.0.0.5:6379, namespace hcu, one hcu_guest_slot per attempt" in out.stdout
    assert "gateway: each node starts -m hcu.gateway.openai_proxy --host <node bridge> --out <node token log> " \
           "--max-requests-per-task 100 --rate-limit-max-wait" in out.stdout and "--ports <free port>" in out.stdout
    assert "(in its environment: OSW_OPENAI_UPSTREAM_TOKEN=$AZURE_OPENAI_KEY)" in out.stdout
    assert "--upstream-token" not in out.stdout, "a credential on a command line is visible to every local user"
    assert "--scope-key-file <node copy of the scope key>" in out.stdout
    assert f"scope key: {config.scope_key_file}, shipped to every node (through Ray)" in out.stdout
    assert config.scope_key_file == config.run_dir / "gateway-scope.key"
    probe = subprocess.run([sys.executable, "-c", "import sys, hcu.osworld.run_queue, hcu.osworld.queue.panel, "
                            "hcu.osworld.attempt.pipeline; print('ray' in sys.modules)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "False", "the local path imports Ray"


def test_a_resumed_ray_run_may_move_to_a_new_cluster_address(tmp_path: Path):
    first = load_config(write(tmp_path, executor="ray", ray={"address": "10.0.0.5:6379"}))
    moved = load_config(write(tmp_path, executor="ray", ray={"address": "10.0.0.9:6379"}))
    renamed = load_config(write(tmp_path, executor="ray", ray={"address": "10.0.0.5:6379", "namespace": "other"}))
    assert first.comparable() == moved.comparable() != renamed.comparable()
