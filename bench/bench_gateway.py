"""Gateway overhead: added latency (p50/p99) of plain and streamed calls through the OpenAI gateway versus
direct to the same scripted upstream, at 1 and 20 concurrent clients; throughput ratio against direct, with an
instant upstream (every process competes for the CPU) and with a model-paced one (answers stream over ~0.15 s,
as a model's do over seconds); gateway RSS with 200 open streams. A bare aiohttp pass-through proxy runs
alongside as the floor any aiohttp proxy pays. The upstream, the floor and the gateway are separate
processes; the clients run here, in interleaved rounds.

    python bench/bench_gateway.py [--quick]

Targets (issues 2 and 10): p50 added <= 1 ms at 1 client (was +0.8 ms), throughput >= 0.9x direct at 20
clients, RSS <= 80 MB. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from hcu import REPO_ROOT
from hcu.scripted.replies import Reply, ScriptedRequest, TextReply

SLOW_STREAM = TextReply("slow " * 40, chunks=40, event_delay_sec=0.5)
PACED_STREAM = TextReply("paced " * 8, chunks=8, event_delay_sec=0.008)
PLAIN_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM_BODY = {"model": "m", "input": "hi", "stream": True}


async def bench_responder(req: ScriptedRequest) -> Reply:
    if req.headers.get("x-bench-slow"):
        return SLOW_STREAM
    return PACED_STREAM if req.headers.get("x-bench-paced") else TextReply("ok", chunks=2)


def _serve_upstream(port: int) -> None:
    from hcu.scripted.upstream import build_app

    web.run_app(build_app(bench_responder), host="127.0.0.1", port=port, access_log=None, print=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_up(url: str) -> None:
    async with aiohttp.ClientSession() as s:
        for _ in range(200):
            try:
                async with s.get(url) as r:
                    await r.read()
                    return
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def one_call(s: aiohttp.ClientSession, base: str, streamed: bool, paced: bool = False) -> float:
    start = time.perf_counter()
    if streamed:
        headers = {"x-bench-paced": "1"} if paced else None
        async with s.post(f"{base}/v1/responses", json=STREAM_BODY, headers=headers) as r:
            async for _ in r.content.iter_any():
                pass
    else:
        async with s.post(f"{base}/v1/chat/completions", json=PLAIN_BODY) as r:
            await r.read()
    assert r.status == 200, r.status
    return time.perf_counter() - start


async def run_load(base: str, streamed: bool, clients: int, calls_each: int,
                   paced: bool = False) -> tuple[list[float], float]:
    """Latencies (s) of every call and the wall time of the whole load."""
    latencies: list[float] = []
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as s:
        for _ in range(5):  # warm connections and code paths
            await one_call(s, base, streamed, paced)

        async def client() -> None:
            for _ in range(calls_each):
                latencies.append(await one_call(s, base, streamed, paced))

        start = time.perf_counter()
        await asyncio.gather(*[client() for _ in range(clients)])
        return latencies, time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


def cpu_sec(pid: int) -> float:
    """User + system CPU seconds used so far by a process: a cost figure that contention does not inflate."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def rss_with_open_streams(gateway_base: str, pid: int, streams: int) -> tuple[float, float]:
    idle = rss_mb(pid)
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as s:
        opened = asyncio.Event()
        count = 0

        async def hold(i: int) -> None:
            nonlocal count
            url = f"{gateway_base.replace('/t/bench', f'/t/rss{i}')}/v1/responses"
            async with s.post(url, json=STREAM_BODY, headers={"x-bench-slow": "1"}) as r:
                await r.content.readuntil(b"output_text.delta")
                count += 1
                if count == streams:
                    opened.set()
                await asyncio.sleep(30)

        tasks = [asyncio.create_task(hold(i)) for i in range(streams)]
        await asyncio.wait_for(opened.wait(), 60)
        loaded = rss_mb(pid)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return idle, loaded


def _serve_floor_proxy(port: int, upstream_port: int) -> None:
    """The least an aiohttp pass-through can cost: read, forward, answer; no checks, no log."""

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("x-bench-")}
        async with request.app[SESSION].post(
            f"http://127.0.0.1:{upstream_port}{request.path}", data=body,
            headers={"Content-Type": "application/json", **headers},
        ) as up:
            response = web.StreamResponse(status=up.status, headers={"Content-Type": up.content_type})
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def session(app: web.Application):
        app[SESSION] = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
        yield
        await app[SESSION].close()

    app = web.Application()
    app.cleanup_ctx.append(session)
    app.router.add_route("*", "/{tail:.*}", forward)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


SESSION = web.AppKey("session", aiohttp.ClientSession)


async def compare(
    targets: dict[str, str], streamed: bool, clients: int, calls: int, rounds: int, paced: bool = False
) -> dict[str, tuple[list[float], float]]:
    """Each target's latencies and total wall time, run in interleaved rounds so that all of them see the
    same background load (this machine is shared)."""
    out: dict[str, tuple[list[float], float]] = {name: ([], 0.0) for name in targets}
    for _ in range(rounds):
        for name, base in targets.items():
            latencies, wall = await run_load(base, streamed, clients, calls, paced)
            out[name] = (out[name][0] + latencies, out[name][1] + wall)
    return out


def report_row(call: str, clients: int, res: dict[str, tuple[list[float], float]]) -> str:
    (d, d_wall), (f, f_wall), (g, g_wall) = res["direct"], res["floor"], res["gateway"]
    figures = [
        pct(d, 50),
        pct(f, 50),
        pct(g, 50),
        pct(g, 50) - pct(d, 50),
        pct(d, 99),
        pct(f, 99),
        pct(g, 99),
        pct(g, 99) - pct(d, 99),
        (len(g) / g_wall) / (len(d) / d_wall),
        (len(f) / f_wall) / (len(d) / d_wall),
    ]
    return f"{call:<7}{clients:>4}" + "".join(f"{x:>9.2f}" for x in figures)


async def measure(quick: bool) -> None:
    up_port, gw_port, floor_port = free_port(), free_port(), free_port()
    spawn = multiprocessing.get_context("spawn")
    upstream = spawn.Process(target=_serve_upstream, args=(up_port,), daemon=True)
    floor = spawn.Process(target=_serve_floor_proxy, args=(floor_port, up_port), daemon=True)
    upstream.start()
    floor.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hcu.gateway.openai_proxy",
            "--host",
            "127.0.0.1",
            "--ports",
            str(gw_port),
            "--upstreams",
            f"127.0.0.1:{up_port}",
            "--upstream-kind",
            "openai",
            "--upstream-scheme",
            "http",
            "--out",
            str(tmp / "tokens.jsonl"),
            "--max-requests-per-task",
            "100000000",
            "--max-connections-per-peer",  # every client here is one peer; in a run, each guest is one
            "1000",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "OSW_OPENAI_UPSTREAM_TOKEN": "bench-token"},
        stderr=subprocess.DEVNULL,
    )
    targets = {
        "direct": f"http://127.0.0.1:{up_port}",
        "floor": f"http://127.0.0.1:{floor_port}",
        "gateway": f"http://127.0.0.1:{gw_port}/t/bench",
    }
    try:
        await wait_up(f"{targets['direct']}/v1/models")
        await wait_up(f"{targets['floor']}/v1/models")
        await wait_up(f"http://127.0.0.1:{gw_port}/healthz")
        lines, cpu = [], []
        loads = [("plain", False, 1, 40 if quick else 80), ("stream", True, 1, 40 if quick else 80),
                 ("plain", False, 20, 4 if quick else 8), ("stream", True, 20, 4 if quick else 8),
                 ("paced", True, 20, 2 if quick else 4)]
        for call, streamed, clients, calls in loads:
            pids = (upstream.pid, floor.pid, gateway.pid)
            before = [cpu_sec(pid) for pid in pids]
            res = await compare(targets, streamed, clients, calls, rounds=4, paced=call == "paced")
            calls_each = (sum(len(lat) for lat, _ in res.values()), len(res["floor"][0]), len(res["gateway"][0]))
            if call != "paced":
                cpu.append([(cpu_sec(pid) - b) / n for pid, b, n in zip(pids, before, calls_each, strict=True)])
            lines.append(report_row(call, clients, res))
        idle, loaded = await rss_with_open_streams(targets["gateway"], gateway.pid, 200)
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
        # the gateway read the 200 left streams on (a generation whose client left still counts); give the
        # upstream's handlers a moment to see their connections gone before it shuts down
        time.sleep(1.0)
        floor.terminate()
        upstream.terminate()
    heads = ["p50 dir", "p50 flr", "p50 gw", "p50 +", "p99 dir", "p99 flr", "p99 gw", "p99 +", "thru gw", "thru flr"]
    print(f"{'call':<7}{'cli':>4}" + "".join(f"{h:>9}" for h in heads))
    print("\n".join(lines))
    print(
        "(ms; dir = direct to the scripted upstream, flr = a bare aiohttp pass-through proxy, gw = the gateway;"
        "\n '+' = gw - dir; thru = throughput / direct; paced = answers streamed over ~0.15 s like a model's;"
        "\n targets: p50 + <= 1 at 1 client, thru gw >= 0.9 at 20)"
    )
    up_us, floor_us, gw_us = (statistics.mean(c[i] for c in cpu) * 1e6 for i in range(3))
    print(
        f"CPU per call: gateway {gw_us:.0f} us, bare aiohttp proxy {floor_us:.0f} us, scripted upstream {up_us:.0f} us"
    )
    print(
        f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs shared by the upstream, the proxies, "
        "the clients and whatever else runs here"
    )
    print(f"gateway RSS: {idle:.1f} MB idle, {loaded:.1f} MB with 200 open streams (target <= 80 MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (noisier figures)")
    asyncio.run(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
