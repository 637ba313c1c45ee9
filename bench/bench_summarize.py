"""Summarize a generated 10,000-task run directory; prints seconds and the ratio to a bare read of the files.

Target: under 2 s for 10,000 tasks. Baseline (same process): reading and parsing every result.json with
orjson and nothing else, the I/O floor any summary pays.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import orjson

from hcu.osworld.run_config import parse_config
from hcu.osworld.summary.run_summary import summarize

TASKS = 10_000
DOMAINS = ("chrome", "gimp", "libreoffice_calc", "multi_apps", "os", "vlc")


def fake_result(rng: random.Random) -> dict | None:
    roll = rng.random()
    usage = {"model_calls": rng.randint(1, 100), "input_tokens": rng.randint(1000, 900_000),
             "output_tokens": rng.randint(100, 50_000), "fully_accounted": rng.random() < 0.9}
    if roll < 0.02:
        return None
    if roll < 0.04:
        return {"status": "evaluator_error", "usage": usage}
    termination = "max_model_calls" if roll < 0.10 else "timeout" if roll < 0.13 else "completed"
    score = rng.choice((0.0, 1.0, 1.0, 0.5, 0.25))
    return {"status": "completed", "score": score, "termination_reason": termination, "usage": usage,
            "duration_sec": rng.uniform(60, 3600)}


def make_run(root: Path, rng: random.Random) -> Path:
    tasks = [{"id": f"task-{i:05d}", "task_domain": DOMAINS[i % len(DOMAINS)], "stratum": f"s{i % 3}"}
             for i in range(TASKS)]
    body = {"run_id": "bench", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root), "tasks": tasks}
    config = parse_config(body, root / "bench.json")
    run_dir = config.run_dir
    (run_dir / "tasks").mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps(config.model_dump(mode="json")))
    for task in tasks:
        result = fake_result(rng)
        if result is not None:
            (run_dir / "tasks" / task["id"]).mkdir()
            (run_dir / "tasks" / task["id"] / "result.json").write_bytes(orjson.dumps(result))
        if rng.random() < 0.05:
            retry = run_dir / "retries" / f"{task['id']}-1"
            retry.mkdir(parents=True)
            (retry / "result.json").write_bytes(orjson.dumps({"status": "error", "duration_sec": 120.0,
                                                              "failure_classification": "guest"}))
    return run_dir


def bare_read(run_dir: Path, pattern: str) -> int:
    return sum(len(orjson.loads(path.read_bytes())) for path in run_dir.glob(pattern))


def measure(run_dir: Path, pattern: str = "tasks/*/result.json") -> tuple[float, float, dict]:
    """(seconds to summarize, seconds to read and parse the result files matching `pattern`, the summary)."""
    started = time.perf_counter()
    bare_read(run_dir, pattern)
    baseline = time.perf_counter() - started
    started = time.perf_counter()
    summary = summarize(run_dir)
    return time.perf_counter() - started, baseline, summary


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hcu-bench-summarize-") as tmp:
        took, baseline, summary = measure(make_run(Path(tmp), random.Random(7)))
    print(f"summarize {TASKS} tasks: {took:.3f} s (target < 2 s); bare read of result.json files: "
          f"{baseline:.3f} s; ratio {took / baseline:.2f}x")
    print(f"  score {summary['score']}, lower bound {summary['lower_bound']:.4f}, coverage "
          f"{summary['coverage']:.3f}, ci95 {summary['ci95']['method']}")


if __name__ == "__main__":
    sys.exit(main())
