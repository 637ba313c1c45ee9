"""python -m hcu.osworld.setup_canary: start a guest, run one task's setup without agent or model, write
report.json, remove the guest (canary/attempt.py: the attempt runner without an agent). It also fills the asset
cache, so a later `--offline-assets` run needs no network. With --run-evaluator the report holds the official
evaluator's score of the untouched state; with --probe, the MCP probe's checks on the set-up desktop.

Exit status: 0 passed, 1 failed (report.json says why), 2 bad flags or a task or setting that does not load
(one line), 128 + the signal's number when a stop signal ended it (the guest removed, the report written).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

from hcu.flags import OneLineParser, add_flags, parse_flags
from hcu.osworld.canary.attempt import REPORT_NAME, CanaryOptions, run
from hcu.osworld.osworld_bridge.assets import AssetError
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.stand_ins.asset_source import asset_source
from hcu.osworld.stand_ins.source import stand_in_cache


def parse_args(argv: list[str] | None) -> CanaryOptions:
    parser = OneLineParser(prog="python -m hcu.osworld.setup_canary", description=__doc__)
    add_flags(parser, CanaryOptions)
    args = parse_flags(CanaryOptions, argv, parser)
    return resolved(parser, args, "--result-dir", args.result_dir)


def resolved(parser: OneLineParser, args: Any, folder_flag: str, folder: Path) -> Any:
    """The canary's and the sweep's settings with the guest's defaults filled and the paths their flags name
    checked (a bad one: one line, exit 2); with stand-ins, their cache made ready."""
    if args.guest_image is not None and not args.guest_image.is_file():
        parser.error(f"--guest-image: {args.guest_image} is not a file")
    if args.tasks_dir is not None and not args.tasks_dir.is_dir():
        parser.error(f"--tasks-dir: {args.tasks_dir} is not a folder")
    if folder.exists() and not folder.is_dir():
        parser.error(f"{folder_flag}: {folder} exists and is not a folder")
    updates = args.guest_defaults(getattr(args, "benchmark_version", "v1"))
    if args.asset_stand_ins:
        try:
            updates["asset_cache"] = stand_in_cache(args.asset_cache)
        except AssetError as exc:
            parser.error(str(exc))
    return args.model_copy(update=updates)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stops = StopSignals().install()
    with contextlib.redirect_stdout(sys.stderr):  # OSWorld's getters print; stdout keeps the one result line
        report = run(args, asset_source=asset_source, stops=stops)
    line = f"setup_canary: {report.status}: {args.result_dir / REPORT_NAME}"
    if report.error:
        line += f" ({report.error})"
    print(line, file=sys.stderr if report.status == "failed" else sys.stdout)
    if stops.received:  # stopped: the status a process ended by that signal has
        return 128 + signal.Signals[stops.received]
    return 0 if report.status == "passed" else 2 if report.bad_input else 1


if __name__ == "__main__":
    sys.exit(main())
