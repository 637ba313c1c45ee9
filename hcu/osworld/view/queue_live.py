"""The run page's view of the queue: its live figures while it runs (from queue-status.json, the figures the
queue rewrites every poll, in the words of `ctl status`; the served page then reloads itself every RELOAD_SEC)
and its decisions as a timeline (the last TIMELINE_EVENTS lines of logs/queue.jsonl)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from hcu.osworld.live.figures import figure_rows, finish_text, headline
from hcu.osworld.live.plain import event_line
from hcu.osworld.queue.events import QUEUE_LOG
from hcu.osworld.queue.snapshot import WORKING, QueueSnapshot, read_snapshot
from hcu.osworld.view.data import RunData
from hcu.osworld.view.html import absent, esc, kv, section, when
from hcu.osworld.view.links import Links, ServedLinks
from hcu.osworld.view.tables import data_table, filter_form, select, text

RELOAD_SEC = 10
STALE_SEC = 120.0
"""Figures older than this are not live: the queue that wrote them is gone (killed) or wedged."""
TIMELINE_EVENTS = 500
TIMELINE_TAIL_BYTES = 1 << 20
"""How much of the end of queue.jsonl the timeline reads: a long campaign's log is read from its end only."""


def is_live(snapshot: QueueSnapshot, now: float) -> bool:
    return snapshot.state in WORKING and now - snapshot.updated_at < STALE_SEC


def live_section(run: RunData, links: Links, now: float | None = None) -> str:
    """The queue's figures: live (and reloading, when served) while it runs; else when it last wrote them."""
    now = time.time() if now is None else now
    snapshot = read_snapshot(run.run_dir)
    if snapshot is None:
        return ""
    live = is_live(snapshot, now)
    rows = [(label, esc(run.redactor.text(value))) for label, value in figure_rows(snapshot, now)]
    finishes = "".join(f"<li>{esc(when(f.at))}: {esc(run.redactor.text(finish_text(f)))}</li>"
                       for f in snapshot.recent[::-1])
    body = (f'<p class="sub">{esc(run.redactor.text(headline(snapshot)))}</p>' + kv(rows, "facts")
            + (f'<h3>Last finishes</h3><ul class="tasks">{finishes}</ul>' if finishes else ""))
    if live:
        reload = isinstance(links, ServedLinks)
        note = f"the queue is running; this page reloads every {RELOAD_SEC} s" if reload else "as exported"
        attrs = f' data-reload="{RELOAD_SEC}"' if reload else ""
        return f'<div class="live"{attrs}>{section("Queue (live)", body, anchor="queue", note=esc(note))}</div>'
    note = (f"not live: the queue's figures of {when(snapshot.updated_at)}" +
            (" (the queue that wrote them is gone)" if snapshot.state in WORKING else ""))
    return section("Queue", body, anchor="queue", note=esc(note))


def tail_events(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """The last TIMELINE_EVENTS events of queue.jsonl (torn or foreign lines skipped), and whether there are
    earlier ones."""
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - TIMELINE_TAIL_BYTES))
            data = f.read()
    except OSError:
        return [], False
    lines = data.splitlines()
    if size > TIMELINE_TAIL_BYTES:
        lines = lines[1:]  # the first line read is a part of one
    found = []
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and isinstance(event.get("at"), (int, float)):
            found.append(event)
    return found[-TIMELINE_EVENTS:], size > TIMELINE_TAIL_BYTES or len(found) > TIMELINE_EVENTS


def timeline_section(run: RunData) -> str:
    events, more = tail_events(run.run_dir / QUEUE_LOG)
    if not events:
        return section("Queue events", absent("no logs/queue.jsonl (the queue writes it as it decides)"))
    rows = []
    for event in events[::-1]:
        kind = str(event.get("event"))
        repeat = event.get("repeat") or 1
        key = "" if "task_id" not in event else str(event["task_id"]) + ("" if repeat == 1 else f".r{repeat}")
        line = run.redactor.text((event_line(event) or kind).split(" ", 1)[-1])
        rows.append(({"qkind": kind, "qtask": key, "at": event["at"]},
                     f'<td class="n">{esc(when(event["at"]))}</td><td>{esc(kind)}</td><td class="id">{esc(key)}</td>'
                     f'<td class="note">{esc(line)}</td>'))
    # filter names apart from the attempts table's: the address keeps both tables' filters
    columns = (("time", "at", "num"), ("event", "qkind", "text"), ("task", "qtask", "text"), ("what", "", ""))
    form = filter_form("queue-events", [select("qkind", "event", Counter(str(e.get("event")) for e in events)),
                                        text("qtask", "task", "id contains")])
    note = (f"the last {len(events)} events, newest first; logs/queue.jsonl holds every one" if more else
            "newest first")
    return section("Queue events", form + data_table("queue-events", columns, rows), anchor="queue-events",
                   note=esc(note))
