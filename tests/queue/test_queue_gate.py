"""The launch gate: nothing launches while the gateway is down; a gateway with another budget stops the queue."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hcu.demo.stand_in import free_port
from hcu.osworld.queue.gate import GatewayMismatch, gateway_gate
from hcu.osworld.queue.panel import run_queue
from tests.gateway.conftest import gateway_running, start_gateway_process, wait_healthy
from tests.queue.conftest import STANDIN

pytestmark = pytest.mark.docker  # the queue lists its run's containers when it adopts

TASKS = ["e0df059f-28a6-4169-924f-b9623e7184cc", "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa"]


def test_launches_wait_for_the_gateway(make_panel) -> None:
    panel = make_panel(TASKS)
    answers = iter(["launches held: gateway down", "launches held: gateway down"])
    states = run_queue(panel.config, runner=[sys.executable, str(STANDIN)], poll_interval_sec=0.05,
                       gate=lambda: next(answers, None))
    assert set(states.values()) == {"finished"}
    kinds = [e["event"] for e in panel.queue_events()]
    assert kinds.index("launch") > kinds.index("held") and kinds.count("held") == 2


@pytest.fixture
def gateway_with_budget_7(tmp_path):
    with gateway_running("openai_proxy", [
            "--upstreams", "127.0.0.1:9", "--upstream-kind", "openai", "--upstream-scheme", "http",
            "--upstream-token", "unused", "--out", str(tmp_path / "tokens.jsonl"),
            "--max-requests-per-task", "7"]) as url:
        yield url


def start_gateway(tmp_path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = start_gateway_process("openai_proxy", [
        "--host", "127.0.0.1", "--ports", str(port), "--upstreams", "127.0.0.1:9", "--upstream-kind", "openai",
        "--upstream-scheme", "http", "--out", str(tmp_path / f"tokens-{port}.jsonl"), "--max-requests-per-task", "20",
        *extra], env={"OSW_OPENAI_UPSTREAM_TOKEN": "unused"})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, timeout=30)
    return proc, url


def test_a_gateway_with_another_scope_key_stops_the_queue(make_panel, tmp_path) -> None:
    proc, url = start_gateway(tmp_path, "--scope-key-file", str(tmp_path / "another.key"))
    try:
        panel = make_panel(TASKS, gateway=url, max_model_calls=20)
        with pytest.raises(GatewayMismatch, match="another scope key"):
            gateway_gate(panel.config)()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    proc, url = start_gateway(tmp_path, "--scope-key-file", str(panel.config.scope_key_file))
    try:
        assert gateway_gate(panel.config.model_copy(update={"gateway": url}))() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_gateway_without_a_budget_matches_a_config_without_one(make_panel, tmp_path) -> None:
    """max_model_calls 0 = no budget in the config and at the gateway, so the queue's budget
    check lets it launch."""
    panel = make_panel(TASKS, max_model_calls=0)
    proc, url = start_gateway(tmp_path, "--max-requests-per-task", "0", "--scope-key-file",
                              str(panel.config.scope_key_file))
    try:
        assert gateway_gate(panel.config.model_copy(update={"gateway": url}))() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
