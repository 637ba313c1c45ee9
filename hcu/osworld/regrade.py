"""`python -m hcu.osworld.regrade RUN_DIR [--tasks ID ...] [--osworld-python PY]`: every kept final
desktop of the run (or of the tasks named) restored in a fresh guest and scored by the evaluator of its task file
as it is now (the run's tasks_dir) with OSWorld's code as installed now; regrade.json beside each result.json and
RUN_DIR/regrade/summary.md listing every score that changed (regrading/run.py). No agent runs and no model is
called. `summarize` then reports the regraded scores.

Exit status: 0 every desktop regraded, 1 some could not be (their regrade.json says why), 2 a run, task or
selection without a kept desktop (one line; nothing started), 128 + the signal's number when stopped.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from hcu.flags import OneLineParser
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.regrading.run import RegradeRefused, kept_attempts, load_run, regrade_run


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hcu.osworld.regrade", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--tasks", nargs="+", metavar="ID", help="only these tasks (each of its repeats)")
    parser.add_argument("--osworld-python", type=Path, help="the interpreter of the OSWorld code to score with "
                        "(default: the run's osworld_python)")
    args = parser.parse_args(argv)
    try:
        config = load_run(args.run_dir)
        attempts = kept_attempts(config, args.tasks)
    except RegradeRefused as exc:
        parser.error(str(exc))
    stops = StopSignals().install()
    records = regrade_run(config, attempts, stops=stops, osworld_python=args.osworld_python)
    sys.stdout.write((config.run_dir / "regrade" / "summary.md").read_text())
    if stops.received:
        return 128 + signal.Signals[stops.received]
    return 0 if all(record.status == "completed" for record in records) else 1


if __name__ == "__main__":
    sys.exit(main())
