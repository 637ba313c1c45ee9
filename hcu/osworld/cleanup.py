"""Remove what hcu started, found by labels: containers, volumes, overlays, control folders, port leases, memory
reservations, final desktops whose save was cut short, and snapshot builds that were killed.

`python -m hcu.osworld.cleanup [--run-id R] [--task-id T] [--repeat N] [--attempt N] [--all] [--kept-desktops]`
prints what it removed. Kept final desktops stay unless `--kept-desktops` asks for them too.
Works after a runner was `kill -9`ed mid-boot or mid-save: every resource is labelled or registered before it
exists. A regrade's or open_desktop's guests carry the run id `<run>.regrade` or `<run>.open`.
"""

from __future__ import annotations

import argparse
import sys

from hcu.osworld.guest.removal import cleanup, selector
from hcu.osworld.guest_state import kept
from hcu.osworld.guest_state.snapshots import SnapshotCache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hcu.osworld.cleanup", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--run-id")
    parser.add_argument("--task-id")
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--attempt", type=int)
    parser.add_argument("--all", action="store_true", help="everything labelled hcu.managed=1")
    parser.add_argument("--kept-desktops", action="store_true",
                        help="also the kept final desktops of the attempts chosen (never removed otherwise)")
    args = parser.parse_args(argv)
    chosen = any(value is not None for value in (args.run_id, args.task_id, args.repeat, args.attempt))
    if args.all == chosen:
        parser.error("give --all, or at least one of --run-id/--task-id/--repeat/--attempt (not both)")
    for flag, value in (("--repeat", args.repeat), ("--attempt", args.attempt)):
        if value is not None and value < 1:
            parser.error(f"{flag}: expected an integer >= 1")
    report = cleanup(run_id=args.run_id, task_id=args.task_id, attempt=args.attempt, repeat=args.repeat)
    labels = selector(run_id=args.run_id, task_id=args.task_id, attempt=args.attempt, repeat=args.repeat)
    lines = report.lines()
    lines += [f"removed final desktop {path}" for path in kept.remove_matching(labels, kept_too=args.kept_desktops)]
    lines += [f"removed snapshot build {path}" for path in SnapshotCache().remove_leftovers(labels)]
    for line in lines or ["nothing to remove"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
