"""Scheduling overhead per attempt, ray executor vs local, with the stand-in runner (no guests, no model).

Both run the same panel of ATTEMPTS stand-in attempts (one phase sleeping RUNNER_SEC) on SLOTS slots: local on
this host, ray on a local cluster (a head without slots and two nodes with 3 + 2 slots, on loopback, without
per-phase caps: both panels run SLOTS attempts at once, so their wall times differ by scheduling alone). Per
attempt, from the queue's own events (logs/queue.jsonl) and the stand-in's: start latency (the queue's launch to
the runner's first line), finish latency (the runner's last line to the queue seeing the result in place: for
ray that includes collecting, merging and freeing the slot), and the head's CPU time. The ratio is ray over
local, measured in the same process.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hcu import REPO_ROOT  # noqa: E402
from hcu.osworld.queue.panel import run_queue  # noqa: E402
from hcu.osworld.run_config import parse_config  # noqa: E402
from tests.queue.ray_cluster import SESSION_NODES, start_cluster  # noqa: E402

ATTEMPTS, SLOTS, RUNNER_SEC = 30, 5, 1.0
STANDIN = REPO_ROOT / "tests" / "queue" / "standin_runner.py"
UNCAPPED_NODES = {name: {"slots": spec["slots"], "caps": {}} for name, spec in SESSION_NODES.items()}
"""The session's nodes and slots without their phase caps (which would leave the ray panel 3 agents at once)."""


def panel(root: Path, name: str, **keys: object) -> tuple[object, list[str]]:
    events = root / f"{name}-events.jsonl"
    scenario = root / f"{name}-scenario.json"
    scenario.write_bytes(orjson.dumps({"sleep_sec": [RUNNER_SEC, RUNNER_SEC], "image": None,
                                       "events": str(events), "outcomes": {}}))
    body = {"run_id": name, "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root), "tasks": [f"b{i}" for i in range(ATTEMPTS)],
            "max_active_tasks": SLOTS, "launch_stagger_seconds": 0, "expected_durations_from": [], **keys}
    return parse_config(body, root / f"{name}.json"), [sys.executable, str(STANDIN), "--scenario", str(scenario)]


def measure(root: Path, name: str, **keys: object) -> dict[str, float]:
    config, runner = panel(root, name, **keys)
    cpu, wall = time.process_time(), time.time()
    run_queue(config, runner=runner, poll_interval_sec=0.05)
    cpu, wall = time.process_time() - cpu, time.time() - wall
    queue = [orjson.loads(x) for x in (config.run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    runner_events = [orjson.loads(x) for x in (root / f"{name}-events.jsonl").read_bytes().splitlines()]
    at = {(e["event"], e["task_id"]): e["at"] for e in queue + runner_events if "task_id" in e}
    tasks = [task.id for task in config.tasks]
    return {"start": statistics.mean(at["start", t] - at["launch", t] for t in tasks),
            "finish": statistics.mean(at["exit", t] - at["end", t] for t in tasks),
            "cpu_ms": cpu / ATTEMPTS * 1000, "wall": wall}


def main() -> int:
    cluster = start_cluster(UNCAPPED_NODES)
    try:
        with tempfile.TemporaryDirectory(prefix="hcu-bench-ray-") as tmp:
            root = Path(tmp)
            local = measure(root, "local")
            ray = measure(root, "ray", executor="ray", ray={"address": cluster.address})
    finally:
        cluster.cluster.shutdown()
    print(f"{ATTEMPTS} stand-in attempts of {RUNNER_SEC:.0f} s on {SLOTS} slots (per attempt, mean):")
    for label, figures in (("local", local), ("ray", ray)):
        print(f"  {label:5s}: start latency {figures['start'] * 1000:6.0f} ms, finish latency "
              f"{figures['finish'] * 1000:6.0f} ms, head CPU {figures['cpu_ms']:5.1f} ms; panel wall "
              f"{figures['wall']:.1f} s (ideal {ATTEMPTS / SLOTS * RUNNER_SEC:.0f} s)")
    overhead = {name: f["start"] + f["finish"] for name, f in (("local", local), ("ray", ray))}
    print(f"  scheduling overhead per attempt: local {overhead['local']:.2f} s, ray {overhead['ray']:.2f} s, "
          f"ratio {overhead['ray'] / overhead['local']:.1f}x; head CPU ratio "
          f"{ray['cpu_ms'] / local['cpu_ms']:.1f}x; panel wall ratio {ray['wall'] / local['wall']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
