"""A simulated campaign: 1,107 attempts (369 tasks x 3 repeats) over 70 nodes x 16 guest slots with per-node
caps of 4 boot+setup / 16 agents / 8 evaluations (Mage-VL-Cowork's fleet), time compressed 1:COMPRESSION.

The head is the real one: `run_queue` (PanelQueue) with its launch order, run directory, status and manifest.
The fleet is simulated (70 Ray nodes do not fit on this machine): an in-process executor whose attempts only
sleep through their phases, placed like Ray's SPREAD (the least busy node), each phase group admitted by its
node's cap as attempt/node_admission.py does on a real node. Attempt phases: boot+setup 60-150 s, agent long-tailed
(lognormal, median 8 min, capped by the 60-minute task timeout), evaluation 10-45 s.

Figure: makespan (first launch to last finish, from queue.jsonl) over the lower bound max(longest attempt,
total work / slots); target <= 1.05 with known durations (an earlier campaign's results, +-15% noise, so the
queue launches longest expected first), also reported without them (the config's order). Also the head's CPU
time and peak RSS for the run (this process: the head plus the simulated fleet's sleeping threads).
"""

from __future__ import annotations

import random
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from fresh_run import FreshRun  # beside this script, as bench_live_view imports this one

from hcu.osworld.queue.events import QueueSink
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.records.result import PhaseTiming, TaskResult
from hcu.osworld.run_config import TaskSpec, parse_config
from hcu.record_io import write_record

TASKS, REPEATS = 369, 3
NODES, SLOTS = 70, 16
CAPS = {"boot_setup": 4, "agent": 16, "evaluate": 8}
COMPRESSION = 150.0
"""Simulated seconds per real second: the longest attempt (~63 min) takes ~25 s here."""
TIMEOUT_SEC = 3600.0
POLL_SEC = 0.02


@dataclass
class Plan:
    """One attempt's phases in simulated seconds."""

    boot_setup: float
    agent: float
    evaluate: float

    @property
    def total(self) -> float:
        return self.boot_setup + self.agent + self.evaluate


def campaign(rng: random.Random) -> dict[str, Plan]:
    plans = {}
    for task in range(TASKS):
        typical = min(rng.lognormvariate(mu=6.18, sigma=0.9), TIMEOUT_SEC)  # median e^6.18 = 8 min
        for repeat in range(1, REPEATS + 1):
            agent = min(typical * rng.uniform(0.8, 1.25), TIMEOUT_SEC)
            plans[f"t{task:03d}-r{repeat}"] = Plan(rng.uniform(60, 150), agent, rng.uniform(10, 45))
    return plans


@dataclass
class SimNode:
    info: NodeInfo
    gates: dict[str, threading.Semaphore]
    running: int = 0


@dataclass
class SimulatedFleet(FreshRun):
    """An executor whose attempts sleep through their phases on simulated nodes with per-node caps."""

    plans: dict[str, Plan]
    name: str = "simulated"
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: set[str] = field(default_factory=set)
    fleet: list[SimNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        for index in range(NODES):
            info = NodeInfo(name=f"sim-{index:02d}", host=f"sim-{index:02d}", slots=SLOTS, caps=dict(CAPS))
            self.fleet.append(SimNode(info, {g: threading.Semaphore(cap) for g, cap in CAPS.items()}))

    def capacity(self) -> int | None:
        return NODES * SLOTS

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        with self.lock:  # SPREAD: the least busy node
            node = min(self.fleet, key=lambda n: n.running)
            node.running += 1
        args = (node, attempt, task_dir)
        threading.Thread(target=self._run, args=args, daemon=True).start()
        return ActiveAttempt(task.id, attempt.attempt, 0, time.time(), False, task_dir, node.info.name,
                             attempt.repeat)

    def _run(self, node: SimNode, attempt_id: AttemptId, task_dir: Path) -> None:
        task_id, attempt = attempt_id.task_id, attempt_id.attempt
        plan, phases = self.plans[task_id], []
        for group, seconds in (("boot_setup", plan.boot_setup), ("agent", plan.agent),
                               ("evaluate", plan.evaluate)):
            with node.gates[group]:
                started = time.time()
                time.sleep(seconds / COMPRESSION)
                phases.append(PhaseTiming(name=group, started_at=started, duration_sec=seconds))
        write_record(task_dir / "result.json", TaskResult(
            status="completed", score=1.0, task_id=task_id, attempt=attempt, attempt_id=str(attempt_id),
            duration_sec=plan.total, phases=phases))
        with self.lock:
            node.running -= 1
            self.done.add(attempt_id.task_key)

    def nodes(self) -> dict[str, NodeInfo]:
        return {node.info.name: node.info for node in self.fleet}

    def gateway_reports(self) -> None:
        return None  # no gateway: nothing observed

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        return None

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        return []

    def close(self, run_done: bool) -> None:
        return None


def earlier_campaign(root: Path, plans: dict[str, Plan], rng: random.Random) -> Path:
    """An earlier run's results: each attempt's duration as measured then (+-15%)."""
    run_dir = root / "earlier"
    (run_dir / "tasks").mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps({"benchmark_version": "v1"}))
    for task_id, plan in plans.items():
        (run_dir / "tasks" / task_id).mkdir()
        result = {"status": "completed", "score": 1.0, "duration_sec": plan.total * rng.uniform(0.85, 1.15)}
        (run_dir / "tasks" / task_id / "result.json").write_bytes(orjson.dumps(result))
    return run_dir


def simulate(root: Path, plans: dict[str, Plan], known: list[str], sinks: Sequence[QueueSink] = (),
             run_id: str | None = None) -> dict[str, float]:
    """Run the campaign's head on the simulated fleet; `sinks` watch it (bench_live_view.py)."""
    body = {"run_id": run_id or f"campaign-{'known' if known else 'unknown'}", "benchmark_version": "v1",
            "agent": "codex", "test_desktop": True, "gateway": "http://127.0.0.1:9", "results_dir": str(root),
            "tasks": list(plans), "max_active_tasks": NODES * SLOTS, "launch_stagger_seconds": 0,
            "expected_durations_from": known}
    config = parse_config(body, root / "campaign.json")
    cpu_before, wall_before = time.process_time(), time.time()
    run_queue(config, executor=SimulatedFleet(plans), poll_interval_sec=POLL_SEC, sinks=sinks)
    cpu, wall = time.process_time() - cpu_before, time.time() - wall_before
    events = [orjson.loads(line) for line in (config.run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    launches = [e["at"] for e in events if e["event"] == "launch"]
    exits = [e["at"] for e in events if e["event"] == "exit"]
    makespan = (max(exits) - min(launches)) * COMPRESSION
    bound = max(max(p.total for p in plans.values()), sum(p.total for p in plans.values()) / (NODES * SLOTS))
    return {"makespan": makespan, "bound": bound, "cpu": cpu, "wall": wall,
            "head_start": (min(launches) - wall_before)}


def main() -> int:
    rng = random.Random(1107)
    plans = campaign(rng)
    longest, work = max(p.total for p in plans.values()), sum(p.total for p in plans.values())
    print(f"campaign: {len(plans)} attempts, {NODES} nodes x {SLOTS} slots, caps boot+setup/agent/evaluate "
          f"{CAPS['boot_setup']}/{CAPS['agent']}/{CAPS['evaluate']}; longest attempt {longest / 60:.1f} min, "
          f"total work {work / 3600:.0f} h, time compressed 1:{COMPRESSION:.0f}")
    with tempfile.TemporaryDirectory(prefix="hcu-bench-campaign-") as tmp:
        root = Path(tmp)
        earlier = earlier_campaign(root, plans, rng)
        for label, known in (("known durations (longest first)", [str(earlier)]), ("no durations (config order)", [])):
            figures = simulate(root, plans, known)
            print(f"{label}: makespan {figures['makespan'] / 60:.1f} min, lower bound {figures['bound'] / 60:.1f} "
                  f"min, ratio {figures['makespan'] / figures['bound']:.3f} (target <= 1.05 with durations)")
            print(f"  head: {figures['cpu']:.1f} s CPU over {figures['wall']:.1f} s wall "
                  f"({figures['cpu'] / len(plans) * 1000:.1f} ms per attempt), start to first launch "
                  f"{figures['head_start']:.2f} s")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"head peak RSS {peak_mb:.0f} MB (with the simulated fleet's {len(plans)} sleeping threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
