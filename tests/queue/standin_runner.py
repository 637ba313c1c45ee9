"""A stand-in for `python -m hcu.osworld.run_task` with the same command-line contract, for queue tests.

It does what the queue relies on and nothing else: writes the attempt.json lease first, optionally starts a
labelled `sleep` container on the real engine, then goes through its phases sleeping a short random time in
each (through the real PhaseLog, so a node's phase caps apply as they do to run_task), removes its container
and writes a result.json whose status and failure class come from the scenario file named by --scenario (or
HCU_STANDIN_SCENARIO):
  {"sleep_sec": [min, max], "image": "<tag or null>", "events": "<jsonl path>",
   "phases": {"<phase>": [min, max], ...} (default: one agent phase of sleep_sec),
   "outcomes": {"<task-id>": [{"status": ..., "score": ..., "failure_classification": ...,
                              "termination_reason": ...}, ...one per attempt; the last repeats]}}
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from pathlib import Path

import docker
import orjson

from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.attempt.lease import lease_for_this_process
from hcu.osworld.attempt.phases import PhaseLog
from hcu.osworld.attempt.result import TaskResult
from hcu.osworld.queue.admission import admission_from_env
from hcu.record_io import write_json, write_record


def log_event(path: Path, **fields: object) -> None:
    with path.open("ab") as f:
        f.write(orjson.dumps({"at": time.time(), "pid": os.getpid(), **fields}) + b"\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--task-id", "--run-id", "--result-dir"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--scenario", default=os.environ.get("HCU_STANDIN_SCENARIO"))
    args, _ = parser.parse_known_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    scenario = orjson.loads(Path(args.scenario).read_bytes())
    result_dir = Path(args.result_dir)
    write_record(result_dir / "attempt.json",
                 lease_for_this_process(args.run_id, args.task_id, args.attempt, result_dir))
    attempt = AttemptId(run_id=args.run_id, task_id=args.task_id, attempt=args.attempt)
    phases = PhaseLog(str(attempt), on_change=lambda name: write_json(
        result_dir / "progress.json", {"phase": name, "since": time.time()}), admit=admission_from_env())
    events = Path(scenario["events"])
    log_event(events, event="start", task_id=args.task_id, attempt=args.attempt)
    started = time.time()
    container = None
    if scenario.get("image"):
        container = docker.from_env(timeout=60).containers.run(
            scenario["image"], ["/bin/sleep", "600"], detach=True, labels=attempt.labels(), network_mode="none")
    for name, span in (scenario.get("phases") or {"agent": scenario["sleep_sec"]}).items():
        with phases.phase(name):
            time.sleep(random.uniform(*span))
    if container is not None:
        container.remove(force=True)
    with phases.phase("collect"):  # leaves the last capped group, as run_task's collect does
        pass
    plan = scenario.get("outcomes", {}).get(args.task_id, [{}])
    outcome = {"status": "completed", "score": 1.0, **plan[min(args.attempt, len(plan)) - 1]}
    log_event(events, event="end", task_id=args.task_id, attempt=args.attempt)
    write_record(result_dir / "result.json", TaskResult(
        task_id=args.task_id, attempt=args.attempt, run_id=args.run_id, attempt_id=str(attempt),
        duration_sec=round(time.time() - started, 3), phases=phases.phases, **outcome))


if __name__ == "__main__":
    main()
