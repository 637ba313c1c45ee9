"""The run's gateway on one Ray node: the agent's gateway module bound to that node's Docker bridge, with the
config's budget and the node's own token log. Guests never cross hosts, so each attempt's scope lives on one
gateway and its budget is exact; the head merges the nodes' token-log rows when it brings results home.

The upstream credential comes from the node's environment (`upstream_token_env`, or the gateway's own
variable), never from the config, a log or the head, and reaches the gateway in its environment, never on its
command line. With per-task secrets the gateway holds the run's scope key (node_key.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import requests

from hcu.gateway.descriptors import PROVIDERS
from hcu.osworld.agents import agent_cli
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.queue.keeper import die_with_parent
from hcu.osworld.run_config import RunConfig
from hcu.osworld.settings import gateway_options

HEALTHZ_TIMEOUT_SEC = 2.0
START_TIMEOUT_SEC = 30.0
STOP_TIMEOUT_SEC = 10.0


class NodeGatewayError(HcuOSWorldError):
    """The node's gateway could not be started; one line, no credential."""


def gateway_command(config: RunConfig, host: str, port: int, token_log: Path,
                    scope_key_file: Path | None) -> list[str]:
    """The gateway's command line on a node (no credential in it: see gateway_environment)."""
    assert config.ray is not None and config.ray.node_gateway is not None
    spec = config.ray.node_gateway
    options = gateway_options(host=host, token_log=token_log, max_model_calls=config.max_model_calls,
                              scope_key_file=scope_key_file, rate_limit_max_wait=spec.rate_limit_max_wait)
    return options.command(agent_cli(config.agent).provider, port, spec.upstream_args)


def token_variable(config: RunConfig) -> str:
    """Where the node's gateway finds the upstream credential in its environment."""
    return agent_cli(config.agent).provider.token_env


def gateway_environment(config: RunConfig) -> dict[str, str]:
    """The node's environment, with `upstream_token_env`'s value as the gateway's own credential variable."""
    spec = config.ray.node_gateway if config.ray else None
    assert spec is not None
    env = dict(os.environ)
    if spec.upstream_token_env:
        token = env.get(spec.upstream_token_env, "").strip()
        if not token:
            raise NodeGatewayError(f"ray.node_gateway.upstream_token_env: {spec.upstream_token_env} is not set "
                                   f"on node {socket.gethostname()} (start its Ray node with it exported)")
        env[token_variable(config)] = token
    return env


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def without_upstream_credentials(config: RunConfig, env: dict[str, str]) -> dict[str, str]:
    """`env` less the upstream credential variables: what a runner on the node inherits (only the gateway
    needs them)."""
    spec = config.ray.node_gateway if config.ray else None
    names = {*(provider.token_env for provider in PROVIDERS.values()),
             *([spec.upstream_token_env] if spec and spec.upstream_token_env else [])}
    return {name: value for name, value in env.items() if name not in names}


class NodeGatewayProcess:
    """One run's gateway on this node; started on first use and again if it died."""

    def __init__(self, config: RunConfig, node_dir: Path) -> None:
        self.config, self.node_dir = config, node_dir
        self.token_log = node_dir / "gateway-tokens.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def ensure(self, scope_key_file: Path | None) -> str:
        """The URL of a running, healthy gateway (started now if needed, with this scope key file). A running
        gateway is never restarted for another key: its attempts would lose their scopes mid-run; a runner
        whose secret it would refuse stops at its probe, before any model call, as a gateway failure."""
        if self.proc is not None and self.proc.poll() is None and self._healthy():
            return self.url
        self.stop()
        return self._start(scope_key_file)

    def _start(self, scope_key_file: Path | None) -> str:
        from hcu.osworld.guest.bridge import bridge_address

        env = gateway_environment(self.config)
        host = bridge_address()
        port = free_port(host)
        self.node_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.node_dir / "gateway.log"
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(gateway_command(self.config, host, port, self.token_log, scope_key_file),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
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
