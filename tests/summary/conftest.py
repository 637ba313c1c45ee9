"""Hand-made run directories with repeats: config.json as the queue stores it, result.json files per repeat."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.osworld.records.identity import repeat_key
from hcu.osworld.run_config import parse_config


def ok(score: float, **more: object) -> dict:
    return {"status": "completed", "score": score, "termination_reason": "completed", **more}


def make_repeat_run(root: Path, run_id: str, results: dict[str, list[dict | None]], *,
                    retries: dict[str, list[dict]] | None = None, **config: object) -> Path:
    """results: task id -> one result (or None: never ran) per repeat; retries: repeat key -> set-aside results.
    `repeats` defaults to the longest list."""
    body = {"run_id": run_id, "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root), "tasks": list(results),
            "repeats": max(len(r) for r in results.values()), **config}
    resolved = parse_config(body, root / f"{run_id}.json")
    run_dir = resolved.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps(resolved.model_dump(mode="json")))
    for task_id, repeats in results.items():
        for repeat, result in enumerate(repeats, start=1):
            if result is not None:
                folder = run_dir / "tasks" / repeat_key(task_id, repeat)
                folder.mkdir(parents=True)
                (folder / "result.json").write_bytes(orjson.dumps({"repeat": repeat, **result}))
    for key, results_ in (retries or {}).items():
        for number, result in enumerate(results_, start=1):
            folder = run_dir / "retries" / f"{key}-{number}"
            folder.mkdir(parents=True)
            (folder / "result.json").write_bytes(orjson.dumps(result))
    return run_dir
