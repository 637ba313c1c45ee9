"""python -m hcu.osworld.canary_sweep --out DIR --tasks-dir D (--test-desktop | --guest-image Q) [...]: the
canary (setup, then the official evaluator on the untouched state) for every task of an index (default
<tasks dir>/test_all.json), at most --max-parallel at a time; writes DIR/sweep.json and DIR/sweep.md (and one
pair per domain under DIR/tasks/<domain>/) and prints the wall time. Run it again on the same DIR to resume:
tasks with a final report are not run again. `--asset-stand-ins` serves generated stand-ins for every task
file (offline machines and CI only; every report says so). See hcu/osworld/canary/sweep.py.

Exit status: 0 the sweep ran (its findings are in the reports), 1 interrupted, 2 bad flags (one line).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from typing import Any

from hcu.flags import OneLineParser, add_flags, parse_flags
from hcu.osworld.canary import sweep_report
from hcu.osworld.canary.sweep import Sweep, SweepError, SweepOptions, select_tasks
from hcu.osworld.setup_canary import resolved


def parse_args(argv: list[str] | None) -> SweepOptions:
    parser = OneLineParser(prog="python -m hcu.osworld.canary_sweep", description=__doc__)
    add_flags(parser, SweepOptions)
    opts = parse_flags(SweepOptions, argv, parser)
    opts = resolved(parser, opts, "--out", opts.out)
    return opts.model_copy(update={"out": opts.out.resolve(), "tasks_dir": opts.tasks_dir.resolve()})


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("hcu.osworld.child").setLevel(logging.WARNING)  # OSWorld's own log lines stay quiet
    sweep = Sweep(opts)
    try:
        tasks = select_tasks(opts)
    except SweepError as exc:
        print(f"canary_sweep: error: {exc}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: Any) -> None:
        print(f"canary_sweep: {signal.Signals(signum).name}: stopping (run again to resume)", file=sys.stderr)
        sweep.interrupt()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # OSWorld's getters print; stdout keeps the summary
            state = sweep.execute(tasks)
    except SweepError as exc:
        print(f"canary_sweep: error: {exc}", file=sys.stderr)
        return 2
    report = sweep_report.write(opts.out, tasks, state)
    total, this = report["total"], state.invocations[-1]
    print(f"canary_sweep: {total['tasks']} tasks, {total['evaluated']} evaluated, {total['passed']} passed; "
          f"this invocation ran {this.ran} in {this.wall_sec / 60:.1f} min, the whole sweep "
          f"{report['wall_sec'] / 60:.1f} min wall; {opts.out / 'sweep.md'}"
          + (" (STAND-IN ASSETS)" if report["stand_ins"] else ""))
    return 1 if this.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
