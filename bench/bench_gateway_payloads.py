"""Large payloads through the OpenAI gateway: one 16 MB SSE event, and a 50 MB request body.

- 16 MB event (a Chat Completions stream whose one delta is 16 MB): wall time through the gateway against
  direct to the same scripted upstream, in interleaved rounds; and `/healthz` latency while the event passes
  against idle (does one client's big event stall everybody else?).
- 50 MB body (a screenshot-heavy request): growth of the gateway process's peak RSS while it forwards one,
  against a bare aiohttp pass-through proxy forwarding the same body (the baseline any aiohttp proxy pays).

    python bench/bench_gateway_payloads.py

Issue 10's figures before: the 16 MB event took 6.4 s with /healthz p50 at 193 ms; the 50 MB body peaked at
258 MB. Figures are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web
from bench_gateway import free_port, wait_up

from hcu import REPO_ROOT
from hcu.scripted.replies import Reply, ScriptedRequest, TextReply

EVENT_BYTES = 16 * 1024 * 1024
BODY_BYTES = 50 * 1024 * 1024
SESSION = web.AppKey("session", aiohttp.ClientSession)


async def big_responder(req: ScriptedRequest) -> Reply:
    return TextReply("x" * EVENT_BYTES, chunks=1) if req.stream else TextReply("ok")


def _serve_upstream(port: int) -> None:
    from hcu.scripted.upstream import build_app

    web.run_app(build_app(big_responder), host="127.0.0.1", port=port, access_log=None, print=None)


def _serve_floor_proxy(port: int, upstream_port: int) -> None:
    """Read the body, forward it, answer: no checks, no log."""

    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        async with request.app[SESSION].post(f"http://127.0.0.1:{upstream_port}{request.path}", data=body,
                                             headers={"Content-Type": "application/json"}) as up:
            return web.Response(status=up.status, body=await up.read(), content_type="application/json")

    async def session(app: web.Application):
        app[SESSION] = aiohttp.ClientSession()
        yield
        await app[SESSION].close()

    app = web.Application(client_max_size=128 * 1024 * 1024)
    app.cleanup_ctx.append(session)
    app.router.add_route("*", "/{tail:.*}", forward)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def big_event(base: str) -> float:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    began = time.perf_counter()
    async with aiohttp.ClientSession() as s, s.post(f"{base}/v1/chat/completions", json=body) as r:
        got = len(await r.read())
    assert r.status == 200 and got > EVENT_BYTES, (r.status, got)
    return time.perf_counter() - began


async def healthz_latencies(url: str, stop: asyncio.Event) -> list[float]:
    out: list[float] = []
    async with aiohttp.ClientSession() as s:
        while not stop.is_set():
            began = time.perf_counter()
            async with s.get(f"{url}/healthz") as r:
                await r.read()
            out.append(time.perf_counter() - began)
            await asyncio.sleep(0.01)
    return out


async def event_figures(direct: str, gateway: str, health: str) -> None:
    idle_stop = asyncio.Event()
    idle_task = asyncio.create_task(healthz_latencies(health, idle_stop))
    await asyncio.sleep(1.0)
    idle_stop.set()
    idle = await idle_task
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    during: list[float] = []
    for _ in range(3):
        times["direct"].append(await big_event(direct))
        stop = asyncio.Event()
        probe = asyncio.create_task(healthz_latencies(health, stop))
        times["gateway"].append(await big_event(gateway))
        stop.set()
        during += await probe
    d, g = statistics.median(times["direct"]), statistics.median(times["gateway"])
    print(f"16 MB event: {g:.2f} s through the gateway, {d:.2f} s direct ({g / d:.2f}x; median of 3)")
    print(f"/healthz p50 while it streams: {statistics.median(during) * 1000:.1f} ms "
          f"(idle: {statistics.median(idle) * 1000:.1f} ms)")


async def body_growth(base: str, pid: int) -> float:
    """Peak RSS growth (MB) of process `pid` while it forwards one 50 MB body."""
    image = "A" * BODY_BYTES
    body = orjson.dumps({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": f"data:image/png;base64,{image}"}]}]})
    del image
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/v1/responses", json={"model": "m", "input": "warm"}) as r:
            await r.read()
        before = peak_rss_mb(pid)
        async with s.post(f"{base}/v1/responses", data=body, headers={"Content-Type": "application/json"}) as r:
            await r.read()
            assert r.status == 200, r.status
    return peak_rss_mb(pid) - before


async def measure() -> None:
    up_port, gw_port, floor_port = free_port(), free_port(), free_port()
    spawn = multiprocessing.get_context("spawn")
    upstream = spawn.Process(target=_serve_upstream, args=(up_port,), daemon=True)
    floor = spawn.Process(target=_serve_floor_proxy, args=(floor_port, up_port), daemon=True)
    upstream.start()
    floor.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-payloads-"))
    gateway = subprocess.Popen(
        [sys.executable, "-m", "hcu.gateway.openai_proxy", "--host", "127.0.0.1", "--ports", str(gw_port),
         "--upstreams", f"127.0.0.1:{up_port}", "--upstream-kind", "openai", "--upstream-scheme", "http",
         "--out", str(tmp / "tokens.jsonl"), "--max-requests-per-task", "100000000"],
        cwd=REPO_ROOT, env={**os.environ, "OSW_OPENAI_UPSTREAM_TOKEN": "bench-token"}, stderr=subprocess.DEVNULL,
    )
    health = f"http://127.0.0.1:{gw_port}"
    try:
        await wait_up(f"http://127.0.0.1:{up_port}/v1/models")
        await wait_up(f"http://127.0.0.1:{floor_port}/v1/models")
        await wait_up(f"{health}/healthz")
        await event_figures(f"http://127.0.0.1:{up_port}", f"{health}/t/bench", health)
        gw_growth = await body_growth(f"{health}/t/bench", gateway.pid)
        floor_growth = await body_growth(f"http://127.0.0.1:{floor_port}", floor.pid)
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
        floor.terminate()
        upstream.terminate()
    mb = BODY_BYTES / 1024 / 1024
    print(f"{mb:.0f} MB request body: gateway peak RSS +{gw_growth:.0f} MB ({gw_growth / mb:.2f}x the body), "
          f"bare aiohttp proxy +{floor_growth:.0f} MB ({gw_growth / max(floor_growth, 1):.2f}x the baseline)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
