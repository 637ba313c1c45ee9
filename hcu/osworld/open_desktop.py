"""`python -m hcu.osworld.open_desktop RUN_DIR TASK_ID [--repeat N]`: a kept final desktop restored in a fresh
guest, and the address where a person sees and uses it (the guest's VNC port, on the Docker bridge only), until
Ctrl-C; then everything it started is removed. No agent, no model, no evaluator: the run's files are only read.

Exit status: 0 after Ctrl-C (or SIGTERM), 1 the desktop could not be restored (one line), 2 a run, task or repeat
without a kept desktop (one line; nothing started).
"""

from __future__ import annotations

import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import requests

from hcu.defaults import GUEST_STATE
from hcu.flags import OneLineParser
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest.kinds import GuestSpec
from hcu.osworld.guest.lifecycle import remove_guest, start_guest
from hcu.osworld.regrading.run import REGRADE_DIR, RegradeRefused, kept_attempts, load_run, regrade_guest
from hcu.osworld.summarize import positive


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m hcu.osworld.open_desktop", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("task_id")
    parser.add_argument("--repeat", type=positive, default=1, help="which repeat of the task (default 1)")
    args = parser.parse_args(argv)
    try:
        config = load_run(args.run_dir)
        found = [item for item in kept_attempts(config, [args.task_id]) if item.repeat == args.repeat]
    except RegradeRefused as exc:
        parser.error(str(exc))
    if not found:
        parser.error(f"{args.task_id} repeat {args.repeat}: no kept final desktop (its other repeats have one)")
    item = found[0]
    settings = config.task_settings(item.task)
    work = config.run_dir / REGRADE_DIR / f"open-{item.folder.name}"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        guest = start_guest(GuestSpec.for_settings(settings), regrade_guest(config, item, "open"), work_dir=work,
                            restore=item.desktop.saved, boot_timeout_sec=settings.timeout_seconds or float("inf"))
    except HcuOSWorldError as exc:
        print(f"open_desktop: {args.task_id}: the desktop could not be restored: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
        return 1
    try:
        screen = f"http://{guest.host}:{guest.ports.vnc}/"
        answers = screen_answers(screen, stop)
        saved = item.desktop.saved
        print(f"open_desktop: {item.task.id} (repeat {item.repeat}) as it was before its evaluator ran, holding "
              f"{', '.join(saved.holds)}" + (f" (not {', '.join(saved.lacks)})" if saved.lacks else ""))
        print(f"  screen: {screen} (VNC over WebSocket; /vnc.html where the guest serves noVNC)"
              + ("" if answers else f"; not answering after {GUEST_STATE.screen_wait_sec:g} s"))
        print(f"  in-guest API: {guest.api_url()}")
        print("  Ctrl-C removes the guest and everything it started.", flush=True)
        stop.wait()
    finally:
        remove_guest(guest)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def screen_answers(url: str, stop: threading.Event) -> bool:
    """Whether the guest's screen port answers HTTP within GUEST_STATE.screen_wait_sec (or until Ctrl-C)."""
    deadline = time.monotonic() + GUEST_STATE.screen_wait_sec
    while True:
        try:
            requests.get(url, timeout=5)
            return True
        except requests.RequestException:
            if time.monotonic() >= deadline or stop.wait(0.5):
                return False


if __name__ == "__main__":
    sys.exit(main())
