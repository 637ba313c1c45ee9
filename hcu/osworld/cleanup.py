"""Remove what hcu started, found by labels: containers, volumes, overlays, port leases, memory reservations.

`python -m hcu.osworld.cleanup [--run-id R] [--task-id T] [--repeat N] [--attempt N] [--all]` prints what it
removed.
Works after a runner was `kill -9`ed mid-boot: every resource is labelled or registered before it exists.
"""

from __future__ import annotations

import argparse
import sys

from hcu.osworld.guest.removal import cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hcu.osworld.cleanup", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--run-id")
    parser.add_argument("--task-id")
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--attempt", type=int)
    parser.add_argument("--all", action="store_true", help="everything labelled hcu.managed=1")
    args = parser.parse_args(argv)
    chosen = any(value is not None for value in (args.run_id, args.task_id, args.repeat, args.attempt))
    if args.all == chosen:
        parser.error("give --all, or at least one of --run-id/--task-id/--repeat/--attempt (not both)")
    for flag, value in (("--repeat", args.repeat), ("--attempt", args.attempt)):
        if value is not None and value < 1:
            parser.error(f"{flag}: expected an integer >= 1")
    report = cleanup(run_id=args.run_id, task_id=args.task_id, attempt=args.attempt, repeat=args.repeat)
    for line in report.lines() or ["nothing to remove"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
