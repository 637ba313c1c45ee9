"""Fixtures: a scripted upstream and real gateways (in-process apps or subprocesses) on loopback."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from hcu import REPO_ROOT
from hcu.gateway.anthropic_proxy import AnthropicProvider
from hcu.gateway.clock import Clock
from hcu.gateway.core import GatewayConfig, GatewayState, build_app, serve
from hcu.gateway.credentials import Credential, StaticCredential
from hcu.gateway.gemini_proxy import GeminiProvider
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.gateway.pool import Pool, parse_upstreams
from hcu.gateway.provider import Provider
from hcu.gateway.tokenlog import TokenLogRow, read_token_log
from hcu.scripted.upstream import QueueResponder, ScriptedUpstream
from hcu.scripted.upstream import build_app as build_upstream_app

SECRET = "sk-REAL-upstream-secret-7f3a9c"
PLACEHOLDER = "placeholder-client-key"


@dataclass
class Upstream:
    state: ScriptedUpstream
    replies: QueueResponder
    hostport: str


class ManualClock(Clock):
    """The gateway's clock in tests: real time underneath, but a wait (rate limit, connection retry) passes at
    once and moves this clock on by its length; `gate`, when set, holds every wait until the test opens it."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.sleeps: list[float] = []
        self.gate: asyncio.Event | None = None

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def time(self) -> float:
        return time.time() + self.offset

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.gate is not None:
            await self.gate.wait()
        self.offset += seconds
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Gateway:
    url: str
    state: GatewayState
    log_path: Path
    runner: web.AppRunner | None = None

    async def stop(self) -> None:
        """Shut the gateway down as a signal would (its log closed, the open intervals' rows written)."""
        assert self.runner is not None
        await self.runner.cleanup()

    @property
    def clock(self) -> ManualClock:
        assert isinstance(self.state.clock, ManualClock)
        return self.state.clock

    def rows(self) -> list[TokenLogRow]:
        return read_token_log(self.log_path)

    async def task_view(self, task: str, secret: str | None = None) -> dict:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        async with aiohttp.ClientSession() as s, s.get(f"{self.url}/healthz", params={"task": task},
                                                       headers=headers) as r:
            return (await r.json())["task"]

    async def health(self) -> dict:
        async with aiohttp.ClientSession() as s, s.get(f"{self.url}/healthz") as r:
            return await r.json()


async def _start(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    replies = QueueResponder()
    state = ScriptedUpstream(replies)
    runner, port = await _start(build_upstream_app(state=state))
    yield Upstream(state, replies, f"127.0.0.1:{port}")
    await runner.cleanup()


PROVIDERS: dict[str, Callable[[Credential], Provider]] = {
    "openai": lambda c: OpenAIProvider(c, "http", "openai"),
    "anthropic": lambda c: AnthropicProvider(c, "http"),
    "gemini": lambda c: GeminiProvider(c, "http"),
}
CREDENTIAL_HEADERS = {"openai": "Authorization", "anthropic": "x-api-key", "gemini": "x-goog-api-key"}


@pytest.fixture
async def make_gateway(tmp_path: Path, upstream: Upstream):
    runners: list[web.AppRunner] = []

    async def make(
        provider: str | Provider = "openai",
        *,
        budget: int = 100,
        upstreams: str | None = None,
        pins: list[str] | None = None,
        max_wait: float = 30.0,
        idle_timeout: float = 30.0,
        log_name: str = "tokens.jsonl",
        clock: ManualClock | None = None,
        host: str = "127.0.0.1",
        **config_fields: object,
    ) -> Gateway:
        if isinstance(provider, str):
            value = f"Bearer {SECRET}" if provider == "openai" else SECRET
            provider = PROVIDERS[provider](StaticCredential(CREDENTIAL_HEADERS[provider], value))
        config = GatewayConfig(
            max_requests_per_task=budget,
            rate_limit_max_wait_sec=max_wait,
            out=tmp_path / log_name,
            upstream_idle_timeout_sec=idle_timeout,
            upstream_connect_timeout_sec=2,
            **config_fields,
        )
        state = GatewayState(
            config, provider, Pool(parse_upstreams(upstreams or upstream.hostport), pins or []),
            clock or ManualClock(),
        )
        runner = await serve(build_app(state), host, [0])
        runners.append(runner)
        return Gateway(f"http://{host}:{runner.addresses[0][1]}", state, config.out, runner)

    yield make
    for runner in runners:
        await runner.cleanup()


async def until(condition: Callable[[], object], what: str, timeout_sec: float = 20.0) -> None:
    """Wait for `condition()` to hold (polled); fail naming `what` if it does not within `timeout_sec`."""
    deadline = time.monotonic() + timeout_sec
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_sec:g} s for {what}")
        await asyncio.sleep(0.02)


async def rows_when_written(gw: Gateway, count: int) -> list[TokenLogRow]:
    await until(lambda: len(gw.rows()) >= count, f"{count} token-log rows")
    return gw.rows()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gateway_process(
    module: str, args: list[str], env: dict[str, str] | None = None, stderr_path: Path | None = None
) -> subprocess.Popen:
    """A real `python -m hcu.gateway.<module>` process."""
    return subprocess.Popen(
        [sys.executable, "-m", f"hcu.gateway.{module}", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=stderr_path.open("wb") if stderr_path else subprocess.DEVNULL,
    )


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 15.0) -> dict:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"gateway exited with {proc.returncode}"
        try:
            return requests.get(f"{url}/healthz", timeout=1).json()
        except requests.ConnectionError:
            time.sleep(0.1)
    raise AssertionError(f"gateway at {url} not healthy after {timeout} s")


@contextmanager
def gateway_running(module: str, args: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """A real gateway process on a free loopback port (its --host/--port(s) added here), stopped at the end; yields
    its URL once /healthz answers."""
    port = free_port()
    flag = "--ports" if module == "openai_proxy" else "--port"
    proc = start_gateway_process(module, ["--host", "127.0.0.1", flag, str(port), *args], env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=30)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)

