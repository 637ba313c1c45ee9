"""The canary sweep on the test desktop with stand-in assets: setup and the official evaluator on the untouched
state, for every task of the vendored test_all.json index (default) at the default cap, or a domain subset.

Baseline, in the same process: one bare gated boot and removal of the same guest (`start_guest` +
`remove_guest`), the floor of every canary. Printed: the sweep's wall time, per domain the tasks, how many
reached "evaluated" and passed, the failures by class, the untouched nonzero scores on feasible tasks, the mean
canary time, and the ratio of a canary to a bare boot (what setup, application checks and the evaluator add).

Long (the whole index is about an hour on a 2-core machine): run it on its own, `bench/run_all.py` leaves it
out unless given `--long`. `python bench/bench_canary_sweep.py [--domains chrome,vlc] [--per-domain N]
[--max-parallel N] [--out DIR]`; an existing --out resumes (the wall time then adds up every invocation).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

from hcu import REPO_ROOT
from hcu.defaults import GUEST
from hcu.osworld.canary.sweep import DEFAULT_PARALLEL
from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.records.identity import AttemptId

IMAGE = os.environ.get("HCU_TEST_DESKTOP_IMAGE", GUEST.test_desktop_image)
"""The test desktop (`--image`; `HCU_TEST_DESKTOP_IMAGE` as for the tests)."""
TASKS_DIR = REPO_ROOT / "tests" / "osworld_tasks"


def bare_canary_floor_sec(image: str, work_dir: Path) -> float:
    """One gated boot of the test desktop and its removal: what every canary pays before setup starts."""
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        started = time.monotonic()
        guest = start_guest(GuestSpec(kind="test-desktop", image=image),
                            AttemptId(run_id=run_id, task_id="bench", attempt=1), work_dir=work_dir)
        remove_guest(guest)
        return time.monotonic() - started
    finally:
        cleanup(run_id=run_id)


def run_sweep(out: Path, args: argparse.Namespace) -> float:
    command = [sys.executable, "-m", "hcu.osworld.canary_sweep", "--out", str(out), "--tasks-dir", str(TASKS_DIR),
               "--test-desktop", args.image, "--asset-stand-ins", "--max-parallel", str(args.max_parallel)]
    if args.domains:
        command += ["--domains", args.domains]
    if args.per_domain:
        command += ["--per-domain", str(args.per_domain)]
    started = time.monotonic()
    subprocess.run(command, cwd=REPO_ROOT, check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", help="only these domains of the index (comma list); default all")
    parser.add_argument("--per-domain", type=int, help="at most this many tasks per domain")
    parser.add_argument("--max-parallel", type=int, default=DEFAULT_PARALLEL)
    parser.add_argument("--image", default=IMAGE, help=f"the test desktop image (default {IMAGE})")
    parser.add_argument("--out", type=Path, help="the sweep folder (kept; an existing one resumes)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        floor = bare_canary_floor_sec(args.image, Path(scratch))
        out = args.out or Path(scratch) / "sweep"
        this_run = run_sweep(out, args)
        sweep = orjson.loads((out / "sweep.json").read_bytes())
    total = sweep["total"]
    print(f"canary sweep on {args.image} with stand-in assets, max_parallel {args.max_parallel}, "
          f"domains {args.domains or 'all'}" + (f", at most {args.per_domain} per domain" if args.per_domain else ""))
    print(f"  wall time                {sweep['wall_sec'] / 60:7.1f} min (this invocation {this_run / 60:.1f} min, "
          f"{len(sweep['invocations'])} invocation(s))")
    print(f"  {'domain':<22} tasks evaluated passed  failures")
    for name, d in [*sweep["domains"].items(), ("total", total)]:
        failures = ", ".join(f"{c} {n}" for c, n in sorted(d["failures"].items())) or "-"
        print(f"  {name:<22} {d['tasks']:5} {d['evaluated']:9} {d['passed']:6}  {failures}")
    nonzero = [r for r in sweep["tasks"] if r.get("evaluated") and r["feasible"] and r["score"]]
    print(f"  untouched nonzero scores on feasible tasks: {len(nonzero)}")
    for row in nonzero:
        print(f"    {row['domain']}/{row['task_id']}: {row['score']:g}")
    ran = [r for r in sweep["tasks"] if r.get("duration_sec")]
    mean = sum(r["duration_sec"] for r in ran) / len(ran) if ran else 0.0
    print(f"  mean canary              {mean:7.1f} s over {len(ran)} canaries")
    print(f"  baseline boot+removal    {floor:7.1f} s")
    print(f"  ratio canary/baseline    {mean / floor:7.2f}")


if __name__ == "__main__":
    main()
