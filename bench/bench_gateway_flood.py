"""Gateway under a flood of free requests from one guest: the gateway's CPU per refused request and per
forwarded call, and a second scope's latency (p50/p99) during the flood against without it, in one run.

The flooder is a separate process on its own loopback address (127.0.0.2, so it is one peer with the default
64 connections, as a guest is), pipelining requests on 64 connections in a cycle of what a hostile guest sends
for free: a route outside the allow-list, a body that is not JSON, a generation past the budget, a token count.
The second scope is one client here, making generations one after another (each on a scope of its own, so the
budget of 2 per scope never refuses it): plain calls to an instant upstream (the most sensitive to the
gateway's CPU), and streams paced like a model's. Three gateways, one after the other, each measured quiet
and then flooded:

- defaults: refusals counted per scope; after 600 in a minute the scope's requests get 429 unread, each held
  1 s (`--flood-delay`), so the flooder gets one answer per connection per second;
- no delay (`--flood-delay 0`): the same, the flooder answered 429 as fast as it sends;
- no flood gate (`--flood-refusals-per-interval` 10^9): every request refused for what it is (body read and
  checked, counted into the aggregate rows): the cost per refused request of each kind.

    python bench/bench_gateway_flood.py [--seconds N]

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from bench_gateway import _serve_upstream, cpu_sec, free_port, one_call, pct, wait_up

from hcu import REPO_ROOT

FLOODER_ADDRESS = "127.0.0.2"
CONNECTIONS = 64
BATCH = 16
"""Requests a flooder connection writes before reading their answers."""
ROUNDS = 3
"""Quiet and flooded measurements alternate this many times (the machine is shared: both see the same load)."""
FREE_KINDS = {
    "route": ("POST", "/v1/files", b"{}"),
    "not_json": ("POST", "/v1/responses", b"{not json"),
    "budget": ("POST", "/v1/responses", b'{"model":"m","input":"hi"}'),
    "count": ("POST", "/v1/responses/input_tokens", b'{"model":"m","input":"hi"}'),
}
GATEWAYS = {
    "defaults": [],
    "no delay": ["--flood-delay", "0"],
    "no flood gate": ["--flood-refusals-per-interval", "1000000000"],
}
_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.I)


def _request(kind: str) -> bytes:
    method, path, body = FREE_KINDS[kind]
    return (f"{method} /t/flood{path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _flood_connection(port: int, kinds: list[str], answered, stop) -> None:  # noqa: ANN001
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(FLOODER_ADDRESS, 0))
    batch = b"".join(_request(kinds[i % len(kinds)]) for i in range(BATCH))
    while not stop.is_set():
        writer.write(batch)
        for _ in range(BATCH):
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(_LENGTH.search(head)[1]))
            answered.value += 1  # one thread writes it: no lock needed
    writer.close()


def _flood(port: int, kinds: list[str], answered, stop) -> None:  # noqa: ANN001
    async def run() -> None:
        await asyncio.gather(*[_flood_connection(port, kinds, answered, stop) for _ in range(CONNECTIONS)],
                             return_exceptions=True)

    asyncio.run(run())


class Flood:
    """A flooder process sending `kinds` to the gateway at `port` until stopped; `answered` counts answers."""

    def __init__(self, port: int, kinds: list[str]) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.answered, self.stop = spawn.RawValue("q", 0), spawn.Event()
        self.proc = spawn.Process(target=_flood, args=(port, kinds, self.answered, self.stop), daemon=True)

    def __enter__(self) -> Flood:
        self.proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()


async def calm_calls(base: str, calls: int, paced: bool, first: int) -> list[float]:
    """`calls` generations one after another, each on a scope of its own (`calm<n>`)."""
    async with aiohttp.ClientSession() as s:
        return [await one_call(s, f"{base}/t/calm{first + i}", streamed=paced, paced=paced) for i in range(calls)]


async def flood_cost(port: int, pid: int, kinds: list[str], seconds: float) -> tuple[float, float]:
    """Gateway CPU (us) per answered flood request, and flood requests answered per second."""
    with Flood(port, kinds) as flood:
        await asyncio.sleep(1.0)  # connections open, the first interval's refusals past
        began, cpu, answered = time.perf_counter(), cpu_sec(pid), flood.answered.value
        await asyncio.sleep(seconds)
        cpu, answered = cpu_sec(pid) - cpu, flood.answered.value - answered
        return cpu / max(answered, 1) * 1e6, answered / (time.perf_counter() - began)


async def measure_gateway(name: str, flags: list[str], up_port: int, seconds: float, tmp: Path) -> list[str]:
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "hcu.gateway.openai_proxy", "--host", "127.0.0.1", "--ports", str(port),
         "--upstreams", f"127.0.0.1:{up_port}", "--upstream-kind", "openai", "--upstream-scheme", "http",
         "--out", str(tmp / f"{name.replace(' ', '-')}.jsonl"), "--max-requests-per-task", "2", *flags],
        cwd=REPO_ROOT, env={**os.environ, "OSW_OPENAI_UPSTREAM_TOKEN": "bench-token"}, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    lines = []
    try:
        await wait_up(f"{base}/healthz")
        async with aiohttp.ClientSession() as s:  # the flooding scope spends its budget
            for _ in range(2):
                await one_call(s, f"{base}/t/flood", streamed=False)
        await calm_calls(base, 20, paced=False, first=0)  # warm
        quiet: dict[str, list[float]] = {"plain": [], "paced": []}
        flooded: dict[str, list[float]] = {"plain": [], "paced": []}
        first, cpu, answered = 100, 0.0, 0
        for _ in range(ROUNDS):
            before = cpu_sec(gateway.pid)
            quiet["plain"] += await calm_calls(base, 100, False, first)
            quiet["paced"] += await calm_calls(base, 10, True, first + 100)
            cpu += cpu_sec(gateway.pid) - before
            with Flood(port, list(FREE_KINDS)) as flood:
                await asyncio.sleep(1.0)
                flooded["plain"] += await calm_calls(base, 100, False, first + 200)
                flooded["paced"] += await calm_calls(base, 10, True, first + 300)
                answered += flood.answered.value
            first += 400
        per_call = cpu / len(quiet["plain"] + quiet["paced"]) * 1e6
        for call in ("plain", "paced"):
            q, f = quiet[call], flooded[call]
            lines.append(f"{name:<14}{call:<7}{pct(q, 50):>8.2f}{pct(f, 50):>8.2f}{pct(f, 50) / pct(q, 50):>7.2f}x"
                         f"{pct(q, 99):>8.2f}{pct(f, 99):>8.2f}{pct(f, 99) / pct(q, 99):>7.2f}x")
        cost, rate = await flood_cost(port, gateway.pid, list(FREE_KINDS), seconds)
        lines.append(f"{name:<14}CPU per forwarded call {per_call:.0f} us; per flood request {cost:.0f} us at "
                     f"{rate:.0f} answered/s (all kinds mixed; {answered} answered while the calm scope ran)")
        if name == "no flood gate":
            for kind in FREE_KINDS:
                cost, rate = await flood_cost(port, gateway.pid, [kind], seconds / 2)
                lines.append(f"{'':<14}refused as {kind:<9} {cost:>5.0f} us per request at {rate:.0f}/s")
        async with aiohttp.ClientSession() as s, s.get(f"{base}/healthz", params={"task": "flood"}) as r:
            flood = (await r.json())["task"]
        refused = sum(flood["refusals"].values())
        lines.append(f"{'':<14}the flooding scope: {refused} refused requests in {flood['log_bytes'] / 1e3:.0f} KB of "
                     f"token log ({flood['log_bytes'] / refused:.1f} bytes each; a row is ~340)")
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
    return lines


async def measure(seconds: float) -> None:
    up_port = free_port()
    upstream = multiprocessing.get_context("spawn").Process(target=_serve_upstream, args=(up_port,), daemon=True)
    upstream.start()
    lines: list[str] = []
    try:
        await wait_up(f"http://127.0.0.1:{up_port}/v1/models")
        with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
            for name, flags in GATEWAYS.items():
                lines += await measure_gateway(name, flags, up_port, seconds, Path(tmp))
    finally:
        upstream.terminate()
    print(f"{'gateway':<14}{'call':<7}{'p50 q':>8}{'p50 fl':>8}{'ratio':>8}{'p99 q':>8}{'p99 fl':>8}{'ratio':>8}")
    print("\n".join(lines))
    print("(ms; q = quiet gateway, fl = while one peer floods it on 64 connections; plain = instant upstream,"
          "\n paced = answers streamed over ~0.15 s like a model's; a flood request is one of: a route outside the"
          "\n allow-list, a body that is not JSON, a generation past the budget, a token count)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs shared by the upstream, the gateway, "
          "the flooder, the calm client and whatever else runs here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each CPU figure is measured")
    asyncio.run(measure(parser.parse_args().seconds))


if __name__ == "__main__":
    main()
