"""What bench_quota.py's attempts run against, in this process: scripted upstreams that enforce a quota as Azure does
(hcu/scripted/rate_limits.py: tokens and requests per minute per deployment, the prompt plus the reserved output
charged at arrival, 429 with retry-after or a 200 stream ending in a rate-limit error) and the real gateway in
front of them, served on an event loop in a thread; and the simulated clock they all read.

Time is compressed: a simulated second lasts 1/factor of a real one for everything that waits (the model's
answers, the guests' phases, the gateway's rate-limit waits, the limiter's one-minute window, the queue's polls
and its admission rule), so the rule runs with its real defaults over hours of simulated campaign.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from aiohttp import web

from bench.quota_profile import SCREENSHOT_TOKENS, ProfileModel
from hcu.gateway.clock import Clock
from hcu.gateway.core import GatewayConfig, GatewayState, build_app, serve
from hcu.gateway.credentials import StaticCredential
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.gateway.pool import Pool, parse_upstreams
from hcu.osworld.queue.clock import QueueClock
from hcu.scripted.rate_limits import DeploymentLimit, RateLimiter, RateLimitSpec
from hcu.scripted.upstream import ScriptedUpstream
from hcu.scripted.upstream import build_app as build_upstream_app

T = TypeVar("T")
RPM_PER_1000_TPM = 6
"""Azure's requests-per-minute limit that follows a deployment's tokens per minute, for most models."""


class SimClock:
    """Simulated time: starts at the Unix time it is made and runs `factor` times faster than real time."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.real_start, self.start = time.monotonic(), time.time()

    def now(self) -> float:
        return self.start + (time.monotonic() - self.real_start) * self.factor

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds) / self.factor)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.factor)


class GatewaySimClock(Clock):
    """The gateway's clock on simulated time (its waits, cooldowns, token-log times)."""

    def __init__(self, sim: SimClock) -> None:
        self.sim = sim

    def monotonic(self) -> float:  # type: ignore[override]
        return self.sim.now()

    def time(self) -> float:  # type: ignore[override]
        return self.sim.now()

    async def sleep(self, seconds: float) -> None:
        await self.sim.asleep(seconds)


class QueueSimClock(QueueClock):
    """The queue's clock on simulated time (launch stagger, polls, pauses, the admission's window)."""

    def __init__(self, sim: SimClock) -> None:
        self.sim = sim

    def time(self) -> float:  # type: ignore[override]
        return self.sim.now()

    def sleep(self, seconds: float) -> None:  # type: ignore[override]
        self.sim.sleep(seconds)


@dataclass(frozen=True)
class QuotaSpec:
    """A quota: per resource (one scripted upstream each), its deployments' tokens per minute."""

    name: str
    resources: tuple[dict[str, int], ...]
    stream_refusal: Literal["http", "event"]
    """How a deployment over its limit refuses a streamed call: HTTP 429, or a 200 stream ending in an error."""
    factor: float = 150.0
    """Simulated seconds per real second for its campaigns: a quota that serves tens of attempts at once needs a
    lower compression for this one process to answer their calls in a small part of a step."""
    largest_multiple: int = 4
    """The largest fixed setting its campaigns run, in multiples of the attempts it serves at once (four times
    twenty attempts are more stand-ins than this one process answers in time)."""
    ports: tuple[int, ...] = ()
    """Each resource's port on 127.0.0.1 (none: any free one). A quota's resources keep their addresses from run
    to run, as real upstreams do: a forecast uses what a pilot was delivered only on the same upstreams."""

    def at_fixed_ports(self) -> QuotaSpec:
        """This quota with a free port chosen for each resource, kept for all its runs."""
        sockets = [socket.create_server(("127.0.0.1", 0)) for _ in self.resources]
        try:
            return replace(self, ports=tuple(sock.getsockname()[1] for sock in sockets))
        finally:
            for sock in sockets:
                sock.close()

    @property
    def tpm(self) -> int:
        return sum(sum(deployments.values()) for deployments in self.resources)

    def describe(self) -> str:
        parts = [" + ".join(f"{tpm // 1000}k" for tpm in deployments.values()) for deployments in self.resources]
        return f"{self.name}: {len(self.resources)} x [{'], ['.join(parts)}] TPM = {self.tpm // 1000}k TPM"


class World:
    """The upstreams of `quota` (None: one upstream without limits) and the gateway in front of them, its token
    log at `token_log`, on an event loop of its own thread."""

    def __init__(self, quota: QuotaSpec | None, clock: SimClock, token_log: Path) -> None:
        self.quota, self.clock, self.token_log = quota, clock, token_log
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bench-quota-world", daemon=True)
        self.runners: list[web.AppRunner] = []
        self.labels: list[str] = []
        self.limits: dict[str, DeploymentLimit] = {}
        self.state: GatewayState | None = None
        self.gateway_url = ""

    def __enter__(self) -> World:
        self.thread.start()
        self.run(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the world's loop and wait for it."""
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def _start(self) -> None:
        resources = self.quota.resources if self.quota else ({"d1": 0},)
        ports = self.quota.ports if self.quota and self.quota.ports else (0,) * len(resources)
        for deployments, port in zip(resources, ports, strict=True):
            limiter = None
            if self.quota is not None:
                limits = {name: DeploymentLimit(tpm=tpm, rpm=tpm * RPM_PER_1000_TPM // 1000)
                          for name, tpm in deployments.items()}
                limiter = RateLimiter(RateLimitSpec(deployments=limits, image_tokens=SCREENSHOT_TOKENS,
                                                    stream_refusal=self.quota.stream_refusal), clock=self.clock.now)
            state = ScriptedUpstream(ProfileModel(self.clock.asleep), limiter)
            state.requests = deque(maxlen=0)  # type: ignore[assignment]  # no record: thousands of 50 kB bodies
            runner = web.AppRunner(build_upstream_app(state=state), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            self.runners.append(runner)
            host = f"127.0.0.1:{runner.addresses[0][1]}"
            for name in deployments:
                self.labels.append(f"{host}@{name}")
                if limiter is not None:
                    self.limits[f"{host}@{name}"] = limiter.spec.deployments[name]
        config = GatewayConfig(max_requests_per_task=0, out=self.token_log)
        provider = OpenAIProvider(StaticCredential("api-key", "bench-upstream-key"), "http", "azure")
        self.state = GatewayState(config, provider, Pool(parse_upstreams(",".join(self.labels)), []),
                                  GatewaySimClock(self.clock))
        gateway = await serve(build_app(self.state), "127.0.0.1", [0])
        self.runners.append(gateway)
        self.gateway_url = f"http://127.0.0.1:{gateway.addresses[0][1]}"

    async def _stop(self) -> None:
        for runner in reversed(self.runners):
            await runner.cleanup()

    def quota_config(self) -> dict[str, dict[str, int]]:
        """The run config's `quota`: every deployment's limits, by the gateway's label for it."""
        return {label: limit.model_dump(exclude_none=True) for label, limit in self.limits.items()}

    def waits(self, prefix: str) -> dict[str, float]:
        """Every scope's rate-limit waits so far (the ones in progress up to now), read on the world's loop."""
        async def read() -> dict[str, float]:
            assert self.state is not None
            return {scope: waits.wait_sec for scope, waits in self.state.budget.waits(prefix).items()}
        return self.run(read())

    def waited(self, scope: str) -> float:
        """The scope's rate-limit waits at the gateway so far (simulated seconds)."""
        assert self.state is not None
        waits = self.state.budget.waits(scope).get(scope)
        return 0.0 if waits is None else waits.wait_sec
