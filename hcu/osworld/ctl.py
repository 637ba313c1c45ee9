"""`python -m hcu.osworld.ctl RUN_DIR status | pause | resume | drain | set KEY=VALUE`: look at, or steer, the
queue running on a run directory without restarting it (queue/control.py).

status prints the figures the queue last wrote (queue-status.json); the others are commands the queue takes at
its next poll and acknowledges, and ctl prints the acknowledgement (exit 0), the queue's refusal (exit 2), or,
after --timeout seconds without an answer, that the queue did not answer (exit 1; a command it never took is
withdrawn). Bad input (a run directory without a running queue, an unknown key, a value the config would
refuse) is one line and exit 2, with nothing sent."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from hcu.flags import OneLineParser
from hcu.osworld.live.figures import status_text
from hcu.osworld.queue.control import (
    VERBS,
    Command,
    ControlChannel,
    ControlError,
    parse_setting,
    queue_running,
    running_config,
    with_setting,
)
from hcu.osworld.queue.snapshot import read_snapshot

PROG = "python -m hcu.osworld.ctl"
ANSWER_TIMEOUT_SEC = 30.0
"""Long enough for a queue polling every 5 s (run_queue's default) that is busy adopting or reaping."""
ANSWER_POLL_SEC = 0.05


def send(run_dir: Path, command: Command, timeout_sec: float) -> int:
    channel = ControlChannel(run_dir)
    channel.submit(command)
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        if (ack := channel.answer(command)) is not None:
            if ack.ok:
                print(ack.message)
                return 0
            print(f"error: {ack.message}", file=sys.stderr)
            return 2
        time.sleep(ANSWER_POLL_SEC)
    if channel.withdraw(command):
        print(f"error: the queue did not answer within {timeout_sec:g} s; the command was withdrawn, nothing "
              "changed", file=sys.stderr)
    else:
        print(f"error: the queue took the command but did not answer within {timeout_sec:g} s", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("command", choices=("status", *VERBS))
    parser.add_argument("setting", nargs="?", metavar="KEY=VALUE", help="with set: the key and its new value")
    parser.add_argument("--timeout", type=float, default=ANSWER_TIMEOUT_SEC,
                        help="seconds to wait for the queue's answer")
    parser.add_argument("--json", action="store_true", help="with status: the figures as queue-status.json holds them")
    args = parser.parse_args(argv)
    if (args.command == "set") != (args.setting is not None):
        parser.error("KEY=VALUE: expected with set, and only with set")
    if args.json and args.command != "status":
        parser.error("--json: only with status")
    run_dir: Path = args.run_dir
    try:
        if not (run_dir / "config.json").is_file():
            raise ControlError(f"{run_dir}: not a run directory (no config.json)")
        key, value = parse_setting(args.setting) if args.setting else (None, None)
        if key is not None:
            with_setting(running_config(run_dir), key, value)  # refused here already, before anything is sent
        if not queue_running(run_dir):
            raise ControlError(f"{run_dir}: no queue is running on this run directory (python -m "
                               "hcu.osworld.run_queue CONFIG starts one)")
        if args.command == "status":
            snapshot = read_snapshot(run_dir)
            if snapshot is None:
                raise ControlError(f"{run_dir}: the queue has not written its figures yet (queue-status.json)")
            print(snapshot.model_dump_json(indent=2) if args.json else status_text(snapshot, time.time()))
            return 0
        command = Command(id=f"{time.time_ns()}-{os.getpid()}", verb=args.command, key=key, value=value,
                          sent_at=time.time())
        return send(run_dir, command, args.timeout)
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
