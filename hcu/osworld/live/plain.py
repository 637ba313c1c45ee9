"""The queue's story as plain lines, for output that is not a terminal (CI, nohup, a log file): one line per
event (launch, finish, set aside, limit change, command, pause, ...) as it happens, and a summary line every
SUMMARY_EVERY_SEC of the queue's clock. A log that cannot be written (its reader went away) stops the lines, never
the queue."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TextIO

from hcu.osworld.live.figures import admission_text, eta_text, phases_text, progress_text
from hcu.osworld.live.score import score_text
from hcu.osworld.queue.snapshot import QueueSnapshot
from hcu.osworld.quota.report import amount, usd

SUMMARY_EVERY_SEC = 60.0
QUIET = frozenset({"orphan_containers_removed"})
ENDED_AS = {"finished": "finished", "exhausted": "out of attempts",
            "infra_failed": "failed (infrastructure; set aside)", "interrupted": "interrupted (set aside)",
            "config_failed": "configuration failure (launches stop)"}
"""How an attempt ended (the queue's state of its repeat), in words."""


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _attempt(e: Mapping[str, object]) -> str:
    repeat = e.get("repeat") or 1
    key = e.get("task_id") if repeat == 1 else f"{e.get('task_id')}.r{repeat}"
    node = f" on {e['node']}" if e.get("node") else ""
    return f"{key} attempt {e.get('attempt')}{node}"


def event_line(e: Mapping[str, object]) -> str | None:
    """One event as a line (None: not worth one)."""
    kind = str(e.get("event"))
    if kind in QUIET:
        return None
    if kind in ("launch", "adopt"):
        text = f"{kind} {_attempt(e)}"
    elif kind == "exit":
        score = f", score {e['score']:g}" if isinstance(e.get("score"), (int, float)) else ""
        text = f"finish {_attempt(e)}: {ENDED_AS.get(str(e.get('state')), e.get('state'))}{score}"
    elif kind == "set_aside":
        text = f"set aside {_attempt(e)}: {e.get('classification')} (it runs again)"
    elif kind == "limit":
        was = f" (was {e['previous']})" if e.get("previous") else ""
        text = f"limit {e.get('limit')} at once{was}: {e.get('signal')}"
    elif kind == "control":
        what = f" {e.get('key')}={e.get('value')}" if e.get("key") else ""
        text = f"ctl {e.get('command')}{what}: {'' if e.get('ok') else 'refused: '}{e.get('message')}"
    elif kind in ("held", "stopped"):
        text = f"{kind}: {e.get('reason')}"
    elif kind == "start":
        text = f"queue started (pid {e.get('pid')}, executor {e.get('executor')})"
    elif kind == "done":
        states = e.get("states") if isinstance(e.get("states"), dict) else {}
        text = "done: every repeat final (" + ", ".join(f"{n} {ENDED_AS.get(k, k)}" for k, n in states.items()) + ")"
    else:
        rest = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("at", "event"))
        text = f"{kind.replace('_', ' ')}{': ' + rest if rest else ''}"
    return f"{stamp(float(e.get('at') or 0))} {text}"  # type: ignore[arg-type]


def summary_line(s: QueueSnapshot) -> str:
    cost = f"; cost {usd(s.spend_usd)} USD" if s.spend_usd is not None else ""
    return (f"{stamp(s.updated_at)} summary: {progress_text(s)}; running {phases_text(s)}; set aside "
            f"{s.set_aside}; score {score_text(s.score)}; tokens {amount(s.tokens)}{cost}; ETA {eta_text(s)}; "
            f"limit {admission_text(s)}")


class PlainLog:
    """A queue sink writing lines to `stream`."""

    def __init__(self, stream: TextIO, every_sec: float = SUMMARY_EVERY_SEC) -> None:
        self.stream, self.every_sec = stream, every_sec
        self.next_summary: float | None = None
        self.last: QueueSnapshot | None = None
        self.held = ""
        self.open = True

    def _write(self, line: str) -> None:
        if not self.open:
            return
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the reader went away: the queue goes on without its lines
            self.open = False

    def event(self, record: Mapping[str, object]) -> None:
        if record.get("event") == "held":  # said once per reason, not every poll it holds
            if record.get("reason") == self.held:
                return
            self.held = str(record.get("reason"))
        elif record.get("event") == "launch":
            self.held = ""
        if (line := event_line(record)) is not None:
            self._write(line)

    def figures(self, snapshot: QueueSnapshot) -> None:
        self.last = snapshot
        if self.next_summary is None:
            self.next_summary = snapshot.updated_at + self.every_sec
        elif snapshot.updated_at >= self.next_summary:
            self.next_summary = snapshot.updated_at + self.every_sec
            self._write(summary_line(snapshot))

    def close(self) -> None:
        """The queue's last figures, as it exits."""
        if self.last is not None:
            self._write(summary_line(self.last))
