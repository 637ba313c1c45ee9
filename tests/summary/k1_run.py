"""A run directory with one scored attempt per task, as the queue wrote it before repeats existed: config.json
without `repeats`, `prices` or `max_cost_usd`, result.json files without `repeat` or `cost_usd`, retries without
a cost. Every scoring rule shows up at least once. `data/k1-summary.json` is what summarize made of it before
repeats existed (see data/README.md); the tests check today's summary keeps every one of those keys and values."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.osworld.run_config import parse_config

RUN_ID = "k1-legacy"
NEW_KEYS = ("repeats", "prices", "max_cost_usd")


def usage(calls: int, inp: int, out: int, accounted: bool = True) -> dict:
    return {"model_calls": calls, "requests": calls, "input_tokens": inp, "cached_input_tokens": inp // 4,
            "output_tokens": out, "reasoning_tokens": out // 3, "fully_accounted": accounted}


def done(score: float, seconds: float, **more: object) -> dict:
    return {"status": "completed", "score": score, "evaluator_score": score, "termination_reason": "completed",
            "duration_sec": seconds, **more}


TASKS = [{"id": "a", "task_domain": "os", "stratum": "easy"}, {"id": "b", "task_domain": "os", "stratum": "easy"},
         {"id": "c", "task_domain": "chrome", "stratum": "hard"}, {"id": "d", "task_domain": "chrome"},
         {"id": "e", "task_domain": "vlc", "stratum": "hard"}, {"id": "f", "task_domain": "vlc"},
         {"id": "g", "task_domain": "gimp"}, {"id": "h", "task_domain": "gimp", "stratum": "easy"},
         {"id": "i", "task_domain": "os"}, {"id": "j", "task_domain": "chrome", "stratum": "hard"}]
RESULTS: dict[str, dict | None] = {
    "a": done(1.0, 310.5, usage=usage(12, 90_000, 4_000)),
    "b": done(0.0, 120.25, usage=usage(30, 300_000, 9_000)),
    "c": done(0.5, 77.0, usage=usage(5, 40_000, 1_000, accounted=False)),
    "d": {"status": "completed", "score": 0.0, "evaluator_score": 1.0, "termination_reason": "max_model_calls",
          "duration_sec": 900.0, "usage": usage(100, 2_000_000, 50_000)},
    "e": {"status": "evaluator_error", "failure_classification": "evaluator", "termination_reason": "completed",
          "duration_sec": 44.0},
    "f": {"status": "error", "failure_classification": "guest", "duration_sec": 15.0},
    "g": None,
    "h": done(1.0, 55.5, getters_read_nothing=[{"getter": "get_vlc_config", "reason": "returned None"}]),
    "i": done(0.25, 600.0, usage=usage(40, 500_000, 20_000)),
    "j": {"status": "completed", "score": 1.0, "termination_reason": "timeout", "duration_sec": 3600.0},
}
RETRIES = {"a": [{"status": "error", "failure_classification": "guest", "duration_sec": 100.0}],
           "f": [{"status": "error", "failure_classification": "setup", "duration_sec": 20.0,
                  "usage": usage(0, 0, 0)},
                 {"status": "error", "failure_classification": "upstream_rate_limit", "duration_sec": 250.0,
                  "usage": usage(7, 70_000, 700)}]}


def make_k1_run(root: Path) -> Path:
    body = {"run_id": RUN_ID, "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root), "tasks": TASKS}
    stored = parse_config(body, root / f"{RUN_ID}.json").model_dump(mode="json")
    for key in NEW_KEYS:
        stored.pop(key, None)
    for task in stored["tasks"]:
        task.pop("repeats", None)
    run_dir = root / RUN_ID
    (run_dir / "tasks").mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps(stored))
    for task_id, result in RESULTS.items():
        if result is not None:
            (run_dir / "tasks" / task_id).mkdir()
            (run_dir / "tasks" / task_id / "result.json").write_bytes(orjson.dumps(result))
    for task_id, results in RETRIES.items():
        for number, result in enumerate(results, start=1):
            (run_dir / "retries" / f"{task_id}-{number}").mkdir(parents=True)
            (run_dir / "retries" / f"{task_id}-{number}" / "result.json").write_bytes(orjson.dumps(result))
    return run_dir
