"""The run's gateway on one Ray node: the agent's gateway module bound to that node's Docker bridge, with the
config's budget and the node's own token log. Guests never cross hosts, so each attempt's scope lives on one
gateway and its budget is exact; the head merges the nodes' token-log rows when it brings results home.

The upstream credential comes from the node's environment (`upstream_token_env`, or the gateway's own
variables for Anthropic and Gemini), never from the config, a log or the head.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from hcu.osworld.defaults import AGENTS
from hcu.osworld.queue.config import RunConfig
from hcu.osworld.queue.keeper import die_with_parent

HEALTHZ_TIMEOUT_SEC = 2.0
START_TIMEOUT_SEC = 30.0
STOP_TIMEOUT_SEC = 10.0


class NodeGatewayError(Exception):
    """The node's gateway could not be started; one line, no credential."""


def gateway_command(config: RunConfig, host: str, port: int, token_log: Path, token: str | None) -> list[str]:
    """The gateway's command line on a node (`token` is the upstream credential, or a placeholder)."""
    assert config.ray is not None and config.ray.node_gateway is not None
    spec, provider = config.ray.node_gateway, AGENTS[config.agent].provider
    argv = [sys.executable, "-m", f"hcu.gateway.{provider}_proxy", "--host", host,
            "--ports" if provider == "openai" else "--port", str(port), "--out", str(token_log),
            "--max-requests-per-task", str(config.max_model_calls),
            "--rate-limit-max-wait", str(spec.rate_limit_max_wait), *spec.upstream_args]
    return argv + (["--upstream-token", token] if token is not None else [])


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class NodeGatewayProcess:
    """One run's gateway on this node; started on first use and again if it died."""

    def __init__(self, config: RunConfig, node_dir: Path) -> None:
        self.config, self.node_dir = config, node_dir
        self.token_log = node_dir / "gateway-tokens.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def ensure(self) -> str:
        """The URL of a running, healthy gateway (started now if needed)."""
        if self.proc is not None and self.proc.poll() is None and self._healthy():
            return self.url
        self.stop()
        return self._start()

    def _start(self) -> str:
        from hcu.osworld.guest.bridge import bridge_address

        spec = self.config.ray.node_gateway if self.config.ray else None
        assert spec is not None
        token = None
        if spec.upstream_token_env:
            token = os.environ.get(spec.upstream_token_env, "").strip()
            if not token:
                raise NodeGatewayError(f"ray.node_gateway.upstream_token_env: {spec.upstream_token_env} is not set "
                                       f"on node {socket.gethostname()} (start its Ray node with it exported)")
        host = bridge_address()
        port = free_port(host)
        self.node_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.node_dir / "gateway.log"
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(gateway_command(self.config, host, port, self.token_log, token),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_parent())
        self.url = f"http://{host}:{port}"
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = log_path.read_bytes()[-300:].decode(errors="replace").strip().splitlines()
                raise NodeGatewayError(f"the node's gateway exited with {self.proc.returncode}: "
                                       f"{tail[-1] if tail else 'no output'}")
            if self._healthy():
                return self.url
            time.sleep(0.1)
        self.stop()
        raise NodeGatewayError(f"the node's gateway at {self.url} did not answer /healthz in {START_TIMEOUT_SEC}s")

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.url}/healthz", timeout=HEALTHZ_TIMEOUT_SEC).ok
        except requests.RequestException:
            return False

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_SEC)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_SEC)
        self.proc = None
