"""The live view of a running queue in a terminal (rich): attempts done with a bar, running attempts by phase,
attempts set aside, the score so far, tokens and cost with what is to go, the ETA, the admission limit and why,
rate-limit waits now, and the last finishes and decisions. Redrawn REFRESH_PER_SEC times a second from the last
figures the queue handed over (its own state, at most once a second): a redraw reads no file."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from hcu.osworld.live.figures import clock, figure_rows, finish_text, headline
from hcu.osworld.live.plain import event_line
from hcu.osworld.queue.snapshot import QueueSnapshot

REFRESH_PER_SEC = 4
NOTABLE = frozenset({"set_aside", "limit", "control", "held", "stopped", "ceiling", "control_restored"})
"""Events the view lists under the finishes (launches and finishes have their own figures)."""
NOTABLE_SHOWN = 5


class TerminalView:
    """A queue sink drawing the view on `stream` (a terminal) until the queue is done with it."""

    def __init__(self, stream: TextIO, refresh_per_sec: float = REFRESH_PER_SEC) -> None:
        self.snapshot: QueueSnapshot | None = None
        self.notable: deque[str] = deque(maxlen=NOTABLE_SHOWN)
        self.lock = threading.Lock()
        self.live = Live(get_renderable=self.render, console=Console(file=stream), refresh_per_second=refresh_per_sec,
                         redirect_stdout=False, redirect_stderr=False)
        self.started = False

    def event(self, record: Mapping[str, object]) -> None:
        if not self.started:  # drawn from the queue's first event on (a config refused earlier draws nothing)
            self.live.start()
            self.started = True
        if record.get("event") in NOTABLE and (line := event_line(record)) is not None:
            with self.lock:
                self.notable.append(line)

    def figures(self, snapshot: QueueSnapshot) -> None:
        self.snapshot = snapshot  # one reference swap: the drawing thread sees the old figures or the new

    def close(self) -> None:
        if self.started:
            self.live.stop()  # the last drawing stays on the screen
            self.started = False

    def render(self) -> RenderableType:
        snapshot = self.snapshot
        if snapshot is None:
            return Text("hcu queue: starting (adopting what runs, reading the run directory) ...")
        return view(snapshot, time.time(), self._notable())

    def _notable(self) -> list[str]:
        with self.lock:
            return list(self.notable)


def view(s: QueueSnapshot, now: float, notable: list[str]) -> RenderableType:
    """The whole view, from the queue's figures."""
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(s.planned, 1), completed=s.done, width=40),
                Text(f"{s.done}/{s.planned} final · {s.running} running · {s.pending} to start"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, text in figure_rows(s, now):
        grid.add_row(label, text)
    parts: list[RenderableType] = [Text(f"hcu queue {headline(s)}", style="bold"), bar, grid]
    if s.recent:
        parts.append(Text("last finishes", style="bold"))
        parts += [Text(f"  {clock(f.at)}  {finish_text(f)}") for f in s.recent[-5:][::-1]]
    if notable:
        parts.append(Text("last decisions", style="bold"))
        parts += [Text(f"  {line}") for line in notable[::-1]]
    return Group(*parts)
