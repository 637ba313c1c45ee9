"""A stand-in for `python -m hcu.osworld.run_task` with the same command-line contract, for queue tests.

It does what the queue relies on and nothing else: writes the attempt.json lease first, optionally starts a
labelled `sleep` container on the real engine, then goes through its phases sleeping a short random time in
each (through the real PhaseLog, so a node's phase caps apply as they do to run_task), removes its container
and writes a result.json whose status and failure class come from the scenario file named by --scenario (or
HCU_STANDIN_SCENARIO). Its start event says what per-task secrets need checked: the id of the key in its
--scope-key-file, that file's mode, the key id its --gateway reports (scenario "ask_gateway") and whether the
upstream credential reached its environment or its command line holds a key. The scenario:
  {"sleep_sec": [min, max], "image": "<tag or null>", "events": "<jsonl path>", "ask_gateway": false,
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
import requests

from hcu.demo.stand_in import STAND_IN_TOKEN
from hcu.gateway.scope_secret import key_id, load_or_create_key
from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.attempt.lease import lease_for_this_process
from hcu.osworld.attempt.result import TaskResult
from hcu.osworld.attempt.runner import PhaseLog
from hcu.osworld.queue.admission import admission_from_env
from hcu.record_io import write_json, write_record


def log_event(path: Path, **fields: object) -> None:
    with path.open("ab") as f:
        f.write(orjson.dumps({"at": time.time(), "pid": os.getpid(), **fields}) + b"\n")


def secrets_seen(key_file: str | None, gateway: str | None, ask_gateway: bool) -> dict[str, object]:
    """What this runner was given for per-task secrets (ids only: a key id is public)."""
    seen: dict[str, object] = {"key_id": None, "key_mode": None, "gateway_key_id": None,
                               "credential_in_env": STAND_IN_TOKEN in os.environ.values()}
    if key_file is not None:
        key = load_or_create_key(Path(key_file))  # as run_task's credential does (runner or gateway creates it)
        seen.update(key_id=key_id(key), key_mode=Path(key_file).stat().st_mode & 0o777, key_file=key_file,
                    key_in_argv=key.hex() in " ".join(sys.argv))
    if ask_gateway and gateway is not None:
        seen["gateway_key_id"] = requests.get(f"{gateway}/healthz", timeout=10).json().get("scope_key_id")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--task-id", "--run-id", "--result-dir"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--scenario", default=os.environ.get("HCU_STANDIN_SCENARIO"))
    parser.add_argument("--scope-key-file")
    parser.add_argument("--gateway")
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
    log_event(events, event="start", task_id=args.task_id, attempt=args.attempt,
              **secrets_seen(args.scope_key_file, args.gateway, scenario.get("ask_gateway", False)))
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
