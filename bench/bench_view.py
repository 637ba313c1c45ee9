"""The run viewer on a 1,107-attempt run (369 tasks x 3 repeats, with trajectories, logs and retries, the queue's
events and the gateway's token log): prints how long the index and a task page take, side by side with a bare read
of the result files, and the ratio; and what the chart of the quota over the run's time costs: its first draw
(reading logs/queue.jsonl and the whole token log) and its share of a page render after.

Target: the index under a second, served and in the browser; task pages on demand. Baseline (same process):
reading and parsing every result.json with orjson and nothing else. The run directory is written with the
project's record models (tests/view/sample_run.py); step screenshots share one small JPEG.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the run builder lives in tests/view

from hcu.osworld.view.attempt_data import read_attempt  # noqa: E402
from hcu.osworld.view.data import RunData  # noqa: E402
from hcu.osworld.view.index_page import render_index  # noqa: E402
from hcu.osworld.view.links import ServedLinks  # noqa: E402
from hcu.osworld.view.quota_chart import quota_charts  # noqa: E402
from hcu.osworld.view.server import make_app  # noqa: E402
from hcu.osworld.view.site import Site  # noqa: E402
from hcu.osworld.view.task_page import render_task  # noqa: E402
from tests.view.sample_run import OUTCOMES, Attempt, build_run  # noqa: E402

TASKS, REPEATS, STEPS = 369, 3, 15
PAGE_SAMPLES = 20
BROWSER_LOADS = 5


def make_run(root: Path) -> Path:
    attempts = [Attempt(f"{i:08x}-bench-4000-8000-{i:012x}", OUTCOMES[(7 * i + r) % len(OUTCOMES)], repeat=r,
                        steps=STEPS - i % 5) for i in range(TASKS) for r in range(1, REPEATS + 1)]
    return build_run(root, "bench-view", attempts, light_screens=True).run_dir


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def bare_read(run_dir: Path) -> int:
    return sum(len(orjson.loads(path.read_bytes())) for path in run_dir.glob("tasks/*/result.json"))


async def served_times(run_dir: Path, keys: list[str]) -> tuple[float, float, float, int]:
    """(first index, warm index, median task page) over HTTP, and the index's size in bytes."""
    async with TestServer(make_app(Site(RunData(run_dir))), host="127.0.0.1") as server, ClientSession() as session:
        async def get(path: str) -> tuple[float, int]:
            started = time.perf_counter()
            async with session.get(f"http://127.0.0.1:{server.port}{path}") as response:
                body = await response.read()
                assert response.status == 200, path
            return time.perf_counter() - started, len(body)

        first, size = await get("/")
        warm, _ = await get("/")
        pages = [(await get(f"/tasks/{key}"))[0] for key in keys]
    return first, warm, statistics.median(pages), size


def quota_chart_cost(run_dir: Path) -> tuple[float, float, float, int]:
    """(first draw, median draw after, median index page render, the chart's bytes) on a fresh RunData."""
    run = RunData(run_dir)
    index = run.index()
    first = timed(lambda: quota_charts(run, index))
    again = statistics.median(timed(lambda: quota_charts(run, index)) for _ in range(PAGE_SAMPLES))
    page = statistics.median(timed(lambda: render_index(run, ServedLinks())) for _ in range(PAGE_SAMPLES))
    return first, again, page, len(quota_charts(run, index).encode())


def browser_load_sec(run_dir: Path, profile: Path) -> tuple[float, float] | None:
    """Navigation start to load end with the table listed, in Debian's headless Chromium: the first load, and
    the median of BROWSER_LOADS more (None when Chromium is not installed)."""
    from tests.view.browser import CHROMEDRIVER, CHROMIUM, chromium, wait_for
    from tests.view.conftest import serve

    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        return None
    loads = []
    with serve([str(run_dir)]) as served:
        for driver in chromium(profile):
            for _ in range(BROWSER_LOADS + 1):
                driver.get(served.url + "/")
                wait_for(driver, lambda d: d.find_element("css selector", "[data-count-for=tasks]").text, "the table")
                wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete", "load end")
                loads.append(driver.execute_script(
                    "return performance.getEntriesByType('navigation')[0].loadEventEnd / 1000;"))
    return loads[0], statistics.median(loads[1:])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hcu-bench-view-") as tmp:
        started = time.perf_counter()
        run_dir = make_run(Path(tmp))
        built = time.perf_counter() - started
        attempts = sum(1 for _ in run_dir.glob("tasks/*/"))
        baseline = timed(lambda: bare_read(run_dir))
        index_data = timed(lambda: RunData(run_dir).index())
        run = RunData(run_dir)
        keys = [row.key for row in run.index().rows[::max(1, attempts // PAGE_SAMPLES)]][:PAGE_SAMPLES]
        links = ServedLinks()
        task_page = statistics.median(timed(lambda k=k: render_task(run, read_attempt(run, "tasks", k), links))
                                      for k in keys)
        first, warm, served_page, size = asyncio.run(served_times(run_dir, keys))
        chart_first, chart_again, page_render, chart_size = quota_chart_cost(run_dir)
        token_log = run_dir / "gateway-tokens.jsonl"
        rows, log_mib = token_log.read_bytes().count(b"\n"), token_log.stat().st_size / 2**20
        browser = browser_load_sec(run_dir, Path(tmp) / "profile")
    print(f"view: a run of {attempts} attempts ({TASKS} tasks x {REPEATS} repeats, up to {STEPS} steps each; "
          f"built in {built:.1f} s)")
    print(f"  bare read of every result.json (baseline): {baseline:.3f} s")
    print(f"  index data (rows from result.json, cold):  {index_data:.3f} s  ratio {index_data / baseline:.2f}x")
    print(f"  index page over HTTP, first request:       {first:.3f} s  ratio {first / baseline:.2f}x "
          f"({size / 1024:.0f} KiB; target < 1 s)")
    print(f"  index page over HTTP, again (cached rows): {warm:.3f} s  ratio {warm / baseline:.2f}x")
    print("  index in headless Chromium, to load end:   " + ("n/a (chromium not installed)" if browser is None else
          f"{browser[0]:.3f} s first, {browser[1]:.3f} s median of {BROWSER_LOADS} reloads (target < 1 s)"))
    print(f"  task page (median of {len(keys)}), rendered:    {task_page:.3f} s; over HTTP {served_page:.3f} s "
          f"(ratio to the bare read of all results {served_page / baseline:.2f}x)")
    print(f"  quota chart, first draw (reads the token log: {rows:,} rows, {log_mib:.1f} MiB): "
          f"{chart_first:.3f} s; after: {1000 * chart_again:.1f} ms of a {1000 * page_render:.0f} ms index "
          f"render (medians of {PAGE_SAMPLES}), {chart_size / 1024:.0f} KiB of the page")


if __name__ == "__main__":
    sys.exit(main())
