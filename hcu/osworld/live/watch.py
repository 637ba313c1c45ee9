"""Which view run_queue shows: the terminal view when its output is a terminal, else the plain-line log."""

from __future__ import annotations

from typing import TextIO

from hcu.osworld.live.plain import PlainLog
from hcu.osworld.live.terminal import TerminalView
from hcu.osworld.queue.events import QueueSink


def watcher(stream: TextIO) -> QueueSink:
    return TerminalView(stream) if stream.isatty() else PlainLog(stream)
