"""The live view's cost to the queue: the head of bench_campaign.py's simulated campaign (1,107 attempts, 369 tasks x
3 repeats, on 70 simulated nodes x 16 slots, time compressed 1:150) run without a view (the baseline), with the
terminal view drawing into a pseudo-terminal (4 redraws a second; another process reads the terminal), and with the
plain-line log written to a file. Each run ROUNDS times, alternating; the figure is the head process's CPU time
(every thread of it: the queue, the view's drawing thread, the simulated fleet's sleeping threads), the median, and
its ratio to the baseline's (target: at most 1.05 with the terminal view). On a shared 2-core machine the whole
process's CPU time moves by more than the view costs, so the view's drawing thread is also timed on its own (its
thread CPU clock) and given as a share of the baseline's head CPU."""

from __future__ import annotations

import fcntl
import os
import pty
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from bench_campaign import campaign, earlier_campaign, simulate

from hcu.osworld.live.plain import PlainLog
from hcu.osworld.live.terminal import TerminalView
from hcu.osworld.queue.events import QueueSink

ROUNDS = 3


class TimedView(TerminalView):
    """The terminal view, with its drawing thread's CPU time read as the queue closes it."""

    drawing_cpu = 0.0

    def close(self) -> None:
        if self.drawer.ident is not None and self.drawer.is_alive():
            TimedView.drawing_cpu += time.clock_gettime(time.pthread_getcpuclockid(self.drawer.ident))
        super().close()


def terminal() -> tuple[int, subprocess.Popen[bytes]]:
    """A pseudo-terminal of 160x50 and a reader process that drains it (its CPU is not the head's)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    reader = subprocess.Popen(["cat"], stdin=master, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(master)
    return slave, reader


def run(root: Path, plans: dict, known: list[str], kind: str, round_: int) -> float:
    reader = None
    sinks: list[QueueSink] = []
    if kind == "terminal view":
        slave, reader = terminal()
        stream = os.fdopen(slave, "w", buffering=1)
        sinks = [TimedView(stream)]
    elif kind == "plain-line log":
        stream = (root / f"plain-{round_}.log").open("w")
        sinks = [PlainLog(stream)]
    try:
        figures = simulate(root, plans, known, sinks, run_id=f"live-{kind.split()[0]}-{round_}")
    finally:
        if sinks:
            stream.close()
        if reader is not None:
            reader.wait(timeout=30)
    return figures["cpu"]


def main() -> int:
    rng = random.Random(1107)
    plans = campaign(rng)
    kinds = ("no view", "terminal view", "plain-line log")
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="hcu-bench-live-") as tmp:
        root = Path(tmp)
        known = [str(earlier_campaign(root, plans, rng))]
        for round_ in range(ROUNDS):
            for kind in kinds:
                cpu[kind].append(run(root, plans, known, kind, round_))
        lines = sum(1 for _ in (root / "plain-0.log").open())
    base = statistics.median(cpu["no view"])
    print(f"campaign: {len(plans)} attempts (bench_campaign's head), {ROUNDS} runs of each, alternating")
    for kind in kinds:
        middle = statistics.median(cpu[kind])
        runs = ", ".join(f"{value:.2f}" for value in cpu[kind])
        print(f"{kind}: head CPU {middle:.2f} s (runs {runs}), ratio {middle / base:.3f} to no view"
              + (" (target <= 1.05)" if kind == "terminal view" else ""))
    drawing = TimedView.drawing_cpu / ROUNDS
    print(f"terminal view's drawing thread alone: {drawing:.3f} s CPU per run, {100 * drawing / base:.1f}% of the "
          "no-view head CPU")
    print(f"plain-line log: {lines} lines for the campaign")
    return 0


if __name__ == "__main__":
    sys.exit(main())
