"""Summarize a generated campaign of 369 tasks x 5 repeats (1,845 scored attempts, about 5% of them retried once,
with usage and cost); prints seconds side by side with a bare read of the same result files.

Target: under 2 s. Baseline (same process): reading and parsing every result.json (tasks/ and retries/) with
orjson and nothing else, the I/O floor any summary pays. The summary adds per-task means, pass@k, both variance
terms, the 10,000-resample cluster bootstrap and cost.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import orjson
from bench_summarize import measure  # bench/ is the script's own folder

from hcu.osworld.records.identity import repeat_key
from hcu.osworld.run_config import parse_config

TASKS, REPEATS = 369, 5
DOMAINS = ("chrome", "gimp", "libreoffice_calc", "libreoffice_impress", "libreoffice_writer", "multi_apps", "os",
           "thunderbird", "vlc", "vs_code")
PRICES = {"gpt-5.5": {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10.0}}


def fake_result(rng: random.Random, skill: float, repeat: int) -> dict:
    usage = {"model_calls": rng.randint(5, 100), "input_tokens": rng.randint(50_000, 2_000_000),
             "cached_input_tokens": rng.randint(0, 40_000), "output_tokens": rng.randint(1_000, 60_000),
             "fully_accounted": True}
    cost = round((usage["input_tokens"] * 1.25 + usage["output_tokens"] * 10) / 1e6, 6)
    if rng.random() < 0.01:
        return {"status": "evaluator_error", "failure_classification": "evaluator", "repeat": repeat,
                "usage": usage, "cost_usd": cost, "duration_sec": rng.uniform(60, 3600)}
    termination = "max_model_calls" if rng.random() < 0.05 else "completed"
    score = 1.0 if rng.random() < skill else rng.choice((0.0, 0.0, 0.5))
    return {"status": "completed", "score": score, "termination_reason": termination, "repeat": repeat,
            "usage": usage, "cost_usd": cost, "duration_sec": rng.uniform(60, 3600)}


def make_run(root: Path, rng: random.Random) -> Path:
    tasks = [{"id": f"task-{i:04d}", "task_domain": DOMAINS[i % len(DOMAINS)]} for i in range(TASKS)]
    body = {"run_id": "bench-repeats", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root), "tasks": tasks, "repeats": REPEATS,
            "prices": PRICES}
    config = parse_config(body, root / "bench-repeats.json")
    run_dir = config.run_dir
    (run_dir / "tasks").mkdir(parents=True)
    (run_dir / "retries").mkdir()
    (run_dir / "config.json").write_bytes(orjson.dumps(config.model_dump(mode="json")))
    for task in tasks:
        skill = rng.random()
        for repeat in range(1, REPEATS + 1):
            key = repeat_key(task["id"], repeat)
            (run_dir / "tasks" / key).mkdir()
            (run_dir / "tasks" / key / "result.json").write_bytes(orjson.dumps(fake_result(rng, skill, repeat)))
            if rng.random() < 0.05:
                (run_dir / "retries" / f"{key}-1").mkdir()
                (run_dir / "retries" / f"{key}-1" / "result.json").write_bytes(orjson.dumps(
                    {"status": "error", "failure_classification": "guest", "repeat": repeat, "duration_sec": 120.0,
                     "cost_usd": 0.0}))
    return run_dir


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hcu-bench-summarize-repeats-") as tmp:
        took, baseline, summary = measure(make_run(Path(tmp), random.Random(369)), "*/*/result.json")
    print(f"summarize {TASKS} tasks x {REPEATS} repeats: {took:.3f} s (target < 2 s); bare read of the result.json "
          f"files (tasks/ and retries/): {baseline:.3f} s; ratio {took / baseline:.2f}x")
    print(f"  score {summary['score']} (lower bound {summary['lower_bound']:.4f}), pass@{summary['repeats']} "
          f"{summary['pass_at_k']}, run-to-run sd {summary['run_to_run_sd']:.4f}, task-list sd "
          f"{summary['task_list_sd']:.4f}, cluster bootstrap {summary['cluster_bootstrap_ci95']['low']:.4f}-"
          f"{summary['cluster_bootstrap_ci95']['high']:.4f}, cost {summary['cost_usd']:.2f} USD")


if __name__ == "__main__":
    sys.exit(main())
