"""`python -m hcu.osworld.summarize RUN_DIR [--compare OTHER_RUN_DIR [--rerun-discordant K]] [--baseline SWEEP_DIR]`:
honest scores for a run (see summary/run_summary.py); with --compare, a paired comparison of task means, and with
--rerun-discordant, both runs' configs with K more repeats on the tasks they disagree on (summary/compare.py);
with --baseline (or the config's `baseline`), the do-nothing baseline beside the score (summary/baseline.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hcu.flags import OneLineParser
from hcu.osworld.summary.run_summary import SummaryError, summarize


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError("expected an integer >= 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hcu.osworld.summarize",
                           description="Summarize a run directory into summary/.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--compare", type=Path, metavar="OTHER_RUN_DIR",
                        help="paired comparison with another run on the tasks both hold")
    parser.add_argument("--rerun-discordant", type=positive, metavar="K",
                        help="with --compare: write both runs' configs with K more repeats on the discordant tasks "
                             "(same run ids: run_queue on each runs only the added repeats)")
    parser.add_argument("--baseline", type=Path, metavar="SWEEP_DIR",
                        help="a canary sweep's folder (sweep.json, made with --run-evaluator): mark the tasks the "
                             "evaluator passes untouched and report the score without them (default: the config's "
                             "baseline)")
    args = parser.parse_args(argv)
    if args.rerun_discordant is not None and args.compare is None:
        parser.error("--rerun-discordant: needs --compare OTHER_RUN_DIR")
    try:
        summarize(args.run_dir, args.compare, args.rerun_discordant, args.baseline)
    except SummaryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write((args.run_dir / "summary" / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
