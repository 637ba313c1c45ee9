"""Median latency of computer-use tools on the test desktop, through the MCP client over `docker exec -i`.

Baseline in the same process: `cursor_position` (one xdotool call), so the ratio shows each tool's cost
beyond the transport and a trivial action. Prints one line per tool.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.computer_use.cu_desktop import GUEST_ARTIFACT, connect, start_desktop  # noqa: E402

ROUNDS = 15


async def measure(desktop) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    async with connect(desktop.server()) as client:
        found = await client.call_tool("find", {"role": "push button", "name": "Click me"})
        assert not found.is_error, found.content
        calls = {
            "cursor_position (baseline)": ("cursor_position", {}),
            "screenshot png 1920x1080": ("screenshot", {}),
            "screenshot jpeg max_width 1280": ("screenshot", {"format": "jpeg", "max_width": 1280}),
            "click": ("click", {"x": 5, "y": 5}),
            "observe (app window)": ("observe", {}),
        }
        await client.call_tool("screenshot", {})  # warm imports (PIL) outside the figures
        for label, (tool, arguments) in calls.items():
            for _ in range(ROUNDS):
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                times.setdefault(label, []).append(time.perf_counter() - started)
                assert not result.is_error, (tool, result.content)
    return times


def main() -> int:
    desktop = start_desktop("bench_computer_use")
    try:
        started = time.perf_counter()
        status, out = desktop.exec([GUEST_ARTIFACT, "--list-tools"], timeout=120)
        assert status == 0, out
        print(f"first start (unpack + list tools): {time.perf_counter() - started:.2f} s")
        times = asyncio.run(measure(desktop))
    finally:
        desktop.container.remove(force=True, v=True)
    baseline = statistics.median(times["cursor_position (baseline)"])
    for label, samples in times.items():
        median = statistics.median(samples)
        ratio = median / baseline
        print(f"{label:34s} median {median * 1000:7.1f} ms  (x{ratio:5.2f} baseline, n={len(samples)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
