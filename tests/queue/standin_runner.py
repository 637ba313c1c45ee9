"""A stand-in for `python -m hcu.osworld.run_task` with the same command-line contract, for queue tests.

It does what the queue relies on and nothing else: writes the attempt.json lease first, optionally starts a
labelled `sleep` container on the real engine, then goes through its phases sleeping a short random time in
each (through the real PhaseLog, so a node's phase caps apply as they do to run_task), removes its container
and writes a result.json whose status and failure class come from the scenario file named by --scenario (or
HCU_STANDIN_SCENARIO). Its start event says what per-task secrets need checked: the id of the key in its
--scope-key-file, that file's mode, the key id its --gateway reports (scenario "ask_gateway") and whether the
upstream credential reached its environment or its command line holds a key. As a gateway would, it appends
the scenario's token-log rows for its scope to --token-log when its first phase starts, and prices its result
the way run_task does (usage and cost from those rows at --prices). The scenario:
  {"sleep_sec": [min, max], "image": "<tag or null>", "events": "<jsonl path>", "ask_gateway": false,
   "phases": {"<phase>": [min, max], ...} (default: one agent phase of sleep_sec),
   "outcomes": {"<key>": [{"status": ..., "score": ..., "failure_classification": ...,
                           "termination_reason": ...}, ...one per attempt; the last repeats]},
   "token_rows": {"<key>": [{"model": ..., "usage": {...}, "counted": true}, ...]},
   "start_after": {"<key>": "<path that must exist before it writes its rows>"},
   "signal_file": {"<key>": "<path created once its rows are written>"},
   "wait_file": {"<key>": "<path that must exist before it finishes>"},
   "generations": {"<key>": <model calls it makes through --gateway in its first phase, with its scope's secret>}}
A key is a repeat's folder name (`<task>` or `<task>.r<n>`); a task id alone stands for all its repeats.
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
from hcu.gateway.scope_secret import key_id, load_or_create_key, scope_secret
from hcu.osworld.attempt.node_admission import admission_from_env
from hcu.osworld.attempt.runner import PhaseLog
from hcu.osworld.records.cost import cost_for_scope
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import lease_for_this_process
from hcu.osworld.records.result import TaskResult
from hcu.osworld.records.usage import usage_for_scope
from hcu.osworld.settings import ModelPrice
from hcu.record_io import write_record

WAIT_FILE_SEC = 120.0


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


def of_key(scenario: dict, name: str, attempt: AttemptId, default: object = None) -> object:
    """The scenario's entry `name` for this repeat (its key), else for its task."""
    entries = scenario.get(name) or {}
    return entries.get(attempt.task_key, entries.get(attempt.task_id, default))


def charge(token_log: str | None, attempt: AttemptId, rows: list[dict]) -> None:
    """Append this attempt's rows to the token log, as the gateway writes them (one write per row)."""
    if token_log is None:
        return
    for number, spec in enumerate(rows, start=1):
        row = {"time": time.time(), "task": attempt.gateway_scope, "provider": spec.get("provider", "openai"),
               "upstream": "standin", "deployment": None, "model": spec.get("model"), "path": "/v1/responses",
               "status": 200, "outcome": "success", "counted": spec.get("counted", True), "calls_used": number,
               "usage": spec.get("usage"), "latency_sec": 0.01, "ttfb_sec": 0.01, "rate_limit_wait_sec": 0.0,
               "attempts": 1, "upstream_request_id": None, "response_id": None}
        with open(token_log, "ab") as log:
            log.write(orjson.dumps(row) + b"\n")


def generate(gateway: str | None, key_file: str | None, attempt: AttemptId, count: int) -> None:
    """Make `count` chat generations through the gateway under the attempt's scope (a rate limit there is waited
    out by the gateway, as for an agent's calls)."""
    if not count or gateway is None:
        return
    secret = scope_secret(load_or_create_key(Path(key_file)), attempt.gateway_scope) if key_file else "placeholder"
    body = {"model": "m", "messages": [{"role": "user", "content": "next step"}], "max_tokens": 16}
    for _ in range(count):
        requests.post(f"{gateway}/t/{attempt.gateway_scope}/v1/chat/completions", json=body, timeout=600,
                      headers={"Authorization": f"Bearer {secret}"}).raise_for_status()


def wait_for_file(path: str | None) -> None:
    deadline = time.time() + WAIT_FILE_SEC
    while path is not None and not Path(path).exists() and time.time() < deadline:
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--task-id", "--run-id", "--result-dir"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--scenario", default=os.environ.get("HCU_STANDIN_SCENARIO"))
    parser.add_argument("--scope-key-file")
    parser.add_argument("--gateway")
    parser.add_argument("--token-log")
    parser.add_argument("--prices", type=orjson.loads)
    args, _ = parser.parse_known_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    scenario = orjson.loads(Path(args.scenario).read_bytes())
    result_dir = Path(args.result_dir)
    attempt = AttemptId(run_id=args.run_id, task_id=args.task_id, attempt=args.attempt, repeat=args.repeat)
    write_record(result_dir / "attempt.json", lease_for_this_process(attempt, result_dir))
    phases = PhaseLog.writing_progress(str(attempt), result_dir, admit=admission_from_env())
    events = Path(scenario["events"])
    log_event(events, event="start", task_id=args.task_id, repeat=args.repeat, attempt=args.attempt,
              scope=attempt.gateway_scope,
              **secrets_seen(args.scope_key_file, args.gateway, scenario.get("ask_gateway", False)))
    started = time.time()
    container = None
    if scenario.get("image"):
        container = docker.from_env(timeout=60).containers.run(
            scenario["image"], ["/bin/sleep", "600"], detach=True, labels=attempt.labels(), network_mode="none")
    for index, (name, span) in enumerate((scenario.get("phases") or {"agent": scenario["sleep_sec"]}).items()):
        with phases.phase(name):
            if index == 0:
                wait_for_file(of_key(scenario, "start_after", attempt))  # type: ignore[arg-type]
                charge(args.token_log, attempt, of_key(scenario, "token_rows", attempt, []))  # type: ignore[arg-type]
                if signal := of_key(scenario, "signal_file", attempt):
                    Path(str(signal)).touch()
                generate(args.gateway, args.scope_key_file, attempt,
                         of_key(scenario, "generations", attempt, 0))  # type: ignore[arg-type]
            time.sleep(random.uniform(*span))
    wait_for_file(of_key(scenario, "wait_file", attempt))  # type: ignore[arg-type]
    if container is not None:
        container.remove(force=True)
    with phases.phase("collect"):  # leaves the last capped group, as run_task's collect does
        token_log = Path(args.token_log) if args.token_log else None
        usage = usage_for_scope(token_log, attempt.gateway_scope) if token_log else None
        prices = {model: ModelPrice.model_validate(price) for model, price in (args.prices or {}).items()}
        cost = cost_for_scope(token_log, attempt.gateway_scope, prices)
    plan: list = of_key(scenario, "outcomes", attempt, [{}])  # type: ignore[assignment]
    outcome = {"status": "completed", "score": 1.0, **plan[min(args.attempt, len(plan)) - 1]}
    log_event(events, event="end", task_id=args.task_id, repeat=args.repeat, attempt=args.attempt)
    write_record(result_dir / "result.json", TaskResult(
        task_id=args.task_id, repeat=args.repeat, attempt=args.attempt, run_id=args.run_id, attempt_id=str(attempt),
        duration_sec=round(time.time() - started, 3), phases=phases.phases, usage=usage, cost_usd=cost, **outcome))


if __name__ == "__main__":
    main()
