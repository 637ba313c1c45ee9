"""The live view of a running queue in a terminal (rich): attempts done with a bar, running attempts by phase,
attempts set aside, the score so far, tokens and cost with what is to go, the ETA, the admission limit and why,
rate-limit waits now, and the last finishes and decisions. Looked at REFRESH_PER_SEC times a second and redrawn
when what it shows changed (new figures from the queue, at most one set a second; a new decision; the clock's
second), from the last figures the queue handed over: a redraw reads no file."""

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
        self.version = 0
        """Figures handed over so far (what a redraw compares, with the decisions noted and the second)."""
        self.notable: deque[str] = deque(maxlen=NOTABLE_SHOWN)
        self.noted = 0
        self.lock = threading.Lock()
        self.live = Live(console=Console(file=stream), auto_refresh=False, redirect_stdout=False,
                         redirect_stderr=False)
        self.every_sec = 1 / refresh_per_sec
        self.done = threading.Event()
        self.drawer = threading.Thread(target=self._draw_until_done, name="hcu-live-view", daemon=True)
        self.drawn: tuple[int, int, int] | None = None

    def event(self, record: Mapping[str, object]) -> None:
        if not self.drawer.is_alive() and not self.done.is_set():  # drawn from the queue's first event on
            self.live.start()
            self.drawer.start()
        if record.get("event") in NOTABLE and (line := event_line(record)) is not None:
            with self.lock:
                self.notable.append(line)
                self.noted += 1

    def figures(self, snapshot: QueueSnapshot) -> None:
        self.snapshot = snapshot  # one reference swap: the drawing thread sees the old figures or the new
        self.version += 1

    def close(self) -> None:
        if self.drawer.is_alive():
            self.done.set()
            self.drawer.join()
            self._draw()
            self.live.stop()  # the last drawing stays on the screen
        self.done.set()

    def _draw_until_done(self) -> None:
        while not self.done.wait(self.every_sec):
            self._draw()

    def _draw(self) -> None:
        """Redraw when what the view shows changed (it shows the clock's seconds in countdowns and ages)."""
        with self.lock:
            noted, notable = self.noted, list(self.notable)
        snapshot, version, now = self.snapshot, self.version, time.time()
        key = (version, noted, int(now))
        if key == self.drawn:
            return
        self.drawn = key
        self.live.update(starting() if snapshot is None else view(snapshot, now, notable), refresh=True)


def starting() -> RenderableType:
    return Text("hcu queue: starting (adopting what runs, reading the run directory) ...")


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
