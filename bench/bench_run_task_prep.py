"""Preparation time of one run_task attempt on the test desktop: container start to agent start, and each phase.

Runs the real pipeline (codex, scripted policy, real gateway) and prints each phase's duration (upload and probe
run alongside setup, so the phases add up to more than the wall time) and the wall time from the boot phase's
start to the agent phase's; the baseline is a bare guest boot (start_guest + remove_guest) measured in the same
process, so the ratio shows what isolation, upload, setup and the preflight checks add on top of booting.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record

TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"
PREP = ("boot", "isolate", "upload", "setup", "probe")
RUNS = 2


def bare_boot(work: Path, n: int) -> float:
    spec = GuestSpec(kind="test-desktop", image="hcu-test-desktop:latest")
    times = []
    for i in range(n):
        started = time.monotonic()
        guest = start_guest(spec, AttemptId(run_id="bench-prep", task_id="boot", attempt=i + 1), work_dir=work)
        times.append(time.monotonic() - started)
        remove_guest(guest)
    return statistics.median(times)


def one_attempt(work: Path, i: int, guest_flags: tuple[str, ...] = ("--test-desktop",)) -> TaskResult:
    out = work / f"attempt-{i}"
    token_log = out / "tokens.jsonl"
    with scripted_stack("codex", REPO_ROOT / "configs" / "demo-policies.json", token_log=token_log,
                        max_model_calls=20, log_dir=out / "logs") as stack:
        subprocess.run([sys.executable, "-m", "hcu.osworld.run_task", "--task-id", TASK, "--task-domain", "os",
                        "--tasks-dir", str(REPO_ROOT / "configs" / "demo-tasks"), *guest_flags,
                        "--agent", "codex", "--max-model-calls", "20", "--token-log", str(token_log),
                        "--gateway", stack.gateway_url, "--result-dir", str(out / "result"),
                        "--run-id", "bench-prep", "--attempt", str(i + 1)],
                       check=True, capture_output=True, timeout=900)
    return read_record(out / "result" / "result.json", TaskResult)


def preparation_sec(result: TaskResult) -> float:
    """Container start (the boot phase's start) to agent start."""
    started = {p.name: p.started_at for p in result.phases}
    return started["agent"] - started["boot"]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        boot = bare_boot(work, RUNS)
        results = [one_attempt(work, i) for i in range(RUNS)]
    per_phase = {name: statistics.median(next(p.duration_sec for p in r.phases if p.name == name) for r in results)
                 for name in PREP}
    total = statistics.median(preparation_sec(r) for r in results)
    print(f"run_task preparation on the test desktop (codex, median of {RUNS})")
    print(f"{'phase':<10}{'seconds':>10}")
    for name, sec in per_phase.items():
        print(f"{name:<10}{sec:>10.2f}")
    print(f"{'wall':<10}{total:>10.2f}   (container start to agent start; upload and probe beside setup)")
    print(f"baseline: bare guest boot {boot:.2f} s; preparation / boot = {total / boot:.2f}x")
    print(f"scores: {[r.score for r in results]}")


if __name__ == "__main__":
    main()
