"""`python -m hcu.osworld.summarize RUN_DIR [--compare OTHER_RUN_DIR]`: honest scores for a run (see
summary/run_summary.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hcu.osworld.summary.run_summary import SummaryError, summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hcu.osworld.summarize",
                                     description="Summarize a run directory into summary/.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--compare", type=Path, metavar="OTHER_RUN_DIR",
                        help="paired comparison with another run on the tasks both hold")
    args = parser.parse_args(argv)
    try:
        summarize(args.run_dir, args.compare)
    except SummaryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write((args.run_dir / "summary" / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
