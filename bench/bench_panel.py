"""The whole demo panel (configs/demo.json: the real queue, runner, codex, gateway and evaluator on the test
desktop, the scripted policy as the model) against what a perfect scheduler could not beat: the sum of its
attempts' agent phases over the panel's concurrency. The ratio (wall / that bound) shows a slower queue or a
longer preparation; the settle wait before evaluation (OSWorld's 20 s, the reference's) is reported apart, as
part of the attempts' time that no scheduler removes either.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hcu.demo.__main__ import DEFAULT_CONFIG, DEFAULT_POLICIES, run_demo  # noqa: E402
from hcu.osworld.records.result import TaskResult  # noqa: E402
from hcu.record_io import read_record  # noqa: E402


def phase_sums(results: list[TaskResult]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for result in results:
        for phase in result.phases:
            sums[phase.name] = sums.get(phase.name, 0.0) + phase.duration_sec
    return sums


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hcu-bench-panel-") as tmp:
        body = orjson.loads(DEFAULT_CONFIG.read_bytes())
        body |= {"results_dir": tmp, "tasks_dir": str(DEFAULT_CONFIG.parent / body["tasks_dir"])}
        config = Path(tmp) / "demo.json"
        config.write_bytes(orjson.dumps(body))
        started = time.monotonic()
        run_demo(config, DEFAULT_POLICIES)
        wall = time.monotonic() - started
        run_dir = Path(tmp) / body["run_id"]
        results = [read_record(path, TaskResult) for path in sorted(run_dir.glob("tasks/*/result.json"))]
    slots = body["max_active_tasks"]
    sums = phase_sums(results)
    agent, settle = sums.get("agent", 0.0), sums.get("settle", 0.0)
    bound = agent / slots
    print(f"demo panel: {len(results)} attempts on {slots} slots, scores {[r.score for r in results]}")
    print(f"  panel wall (queue start to summary): {wall:.1f} s")
    print(f"  agent phases: sum {agent:.1f} s; over {slots} slots {bound:.1f} s (no scheduler beats this)")
    print(f"  settle (OSWorld's wait before evaluation): sum {settle:.1f} s, {settle / slots:.1f} s over the slots")
    others = {name: sec for name, sec in sums.items() if name not in ("agent", "settle")}
    print("  other phases, summed: " + ", ".join(f"{name} {sec:.1f} s" for name, sec in others.items()))
    print(f"  ratio: panel wall / agent bound = {wall / bound:.2f}x; "
          f"without settle = {(wall - settle / slots) / bound:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
