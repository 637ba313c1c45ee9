"""The scripted model stand-in for demos and end-to-end tests: the policy upstream on loopback and the real
gateway for one agent in front of it, bound to the Docker bridge, as child processes.

Only the model is scripted; the gateway, the agent CLI, the guest and the evaluator are the real ones.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from hcu.defaults import GATEWAY
from hcu.osworld.agents import agent_cli
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.settings import gateway_options

STAND_IN_TOKEN = "scripted-upstream-token"
"""The 'real' credential the gateway adds for the scripted upstream; tests check it never reaches a guest."""


@dataclass(frozen=True)
class StandIn:
    gateway_url: str
    token_log: Path
    upstream_url: str
    restart_gateway: Callable[[Callable[[], None] | None], None]
    """Stop the gateway, call the argument (if any) while it is down, and start it again on the same port and
    token log (it restores its counters from the log)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def scripted_stack(agent: str, policies: Path, *, token_log: Path, max_model_calls: int, log_dir: Path,
                   gateway_port: int | None = None, rate_limit_max_wait: float = GATEWAY.rate_limit_max_wait_sec,
                   scope_key_file: Path | None = None, rate_limits: Path | None = None) -> Iterator[StandIn]:
    """Start the policy upstream (enforcing the quotas of the `rate_limits` file, hcu/scripted/rate_limits.py)
    and the agent's gateway (with per-task secrets under `scope_key_file`); stop both on exit."""
    provider = agent_cli(agent).provider
    host = bridge_address()
    up_port, gw_port = free_port(), gateway_port or free_port(host)
    upstream_url = f"http://127.0.0.1:{up_port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        limits = ["--rate-limits", str(rate_limits)] if rate_limits is not None else []
        procs.append(_spawn([sys.executable, "-m", "hcu.scripted.policy", "--policies", str(policies), "--host",
                             "127.0.0.1", "--port", str(up_port), *limits], log_dir / "scripted-upstream.log"))
        _wait_tcp("127.0.0.1", up_port, procs[-1])
        options = gateway_options(host=host, token_log=token_log, max_model_calls=max_model_calls,
                                  scope_key_file=scope_key_file, rate_limit_max_wait=rate_limit_max_wait)
        upstream_flags, upstream_env = provider.upstream_at(upstream_url, STAND_IN_TOKEN)
        argv, env = options.command(provider, gw_port, upstream_flags), {**os.environ, **upstream_env}
        gateway_url = f"http://{host}:{gw_port}"

        def start_gateway() -> None:
            procs.append(_spawn(argv, log_dir / "gateway.log", env))
            _wait_healthz(gateway_url, procs[-1])

        def restart_gateway(while_down: Callable[[], None] | None = None) -> None:
            _stop(procs.pop())
            if while_down is not None:
                while_down()
            start_gateway()

        start_gateway()
        yield StandIn(gateway_url=gateway_url, token_log=token_log, upstream_url=upstream_url,
                      restart_gateway=restart_gateway)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


def _wait_tcp(host: str, port: int, proc: subprocess.Popen, timeout_sec: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[2]} exited with {proc.returncode} before listening")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout_sec}s")


def _wait_healthz(url: str, proc: subprocess.Popen, timeout_sec: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the gateway exited with {proc.returncode} before answering /healthz")
        try:
            if requests.get(f"{url}/healthz", timeout=2).ok:
                return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError(f"the gateway at {url} did not answer /healthz after {timeout_sec}s")
