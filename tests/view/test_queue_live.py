"""The run page's queue sections: the live figures while the queue runs (reloading when served, not in an
export, not once the queue is gone) and the queue's events as a timeline, from a real queue's run directory."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from hcu.osworld.live.figures import figure_rows
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.queue.snapshot import read_snapshot, snapshot_path
from hcu.osworld.view.data import RunData
from hcu.osworld.view.html import esc
from hcu.osworld.view.index_page import render_index
from hcu.osworld.view.links import ExportLinks, ServedLinks
from hcu.osworld.view.queue_live import TIMELINE_EVENTS
from tests.queue.test_launch_pacing import POLL_SEC, MovingClock, TimedExecutor, config

GUEST_FAIL = {"status": "error", "score": None, "failure_classification": "guest"}


def queue_run(tmp_path: Path) -> Path:
    clock = MovingClock()
    run_queue(config(tmp_path, ["t0", "t1", "t2"], max_active_tasks=2, launch_stagger_seconds=0), clock=clock,
              executor=TimedExecutor(clock, {("t1", 1): GUEST_FAIL}), poll_interval_sec=POLL_SEC)
    return tmp_path / "pacing"


def as_running(run_dir: Path, updated_at: float) -> None:
    """The figures as a queue still at work writes them."""
    snapshot = read_snapshot(run_dir)
    assert snapshot is not None and snapshot.state == "done"
    running = snapshot.model_copy(update={"state": "running", "updated_at": updated_at})
    snapshot_path(run_dir).write_bytes(running.model_dump_json().encode())


def test_the_live_figures_show_and_the_page_reloads_while_the_queue_runs(tmp_path: Path) -> None:
    run_dir = queue_run(tmp_path)
    now = time.time()
    as_running(run_dir, now)
    page = render_index(RunData(run_dir), ServedLinks())
    assert "Queue (live)" in page and 'data-reload="10"' in page
    snapshot = read_snapshot(run_dir)
    assert snapshot is not None
    for label, text in figure_rows(snapshot, now)[:-1]:  # the last one (rate limits) counts down with the clock
        assert f"<dt>{esc(label)}</dt><dd>{esc(text)}</dd>" in page, label
    exported = render_index(RunData(run_dir), ExportLinks(0, set()))
    assert "Queue (live)" in exported and "data-reload" not in exported, "a file never changes: no reload"


def test_figures_of_a_queue_that_is_gone_are_not_live(tmp_path: Path) -> None:
    run_dir = queue_run(tmp_path)
    page = render_index(RunData(run_dir), ServedLinks())
    assert "Queue (live)" not in page and "data-reload" not in page and "not live: the queue" in page
    as_running(run_dir, time.time() - 3600)  # killed an hour ago, mid-run
    page = render_index(RunData(run_dir), ServedLinks())
    assert "data-reload" not in page and "(the queue that wrote them is gone)" in page


def test_the_timeline_lists_the_queue_s_events_newest_first(tmp_path: Path) -> None:
    run_dir = queue_run(tmp_path)
    log = run_dir / "logs" / "queue.jsonl"
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    with log.open("ab") as f:
        f.write(b'{"at": 1, "event": "tor')  # a queue killed mid-line
    page = render_index(RunData(run_dir), ServedLinks())
    payload = page.split('id="queue-events-rows">', 1)[1].split("</script>", 1)[0]
    listed = [row["d"]["qkind"] for row in orjson.loads(payload.replace("<\\/", "</"))]
    assert listed == [e["event"] for e in events][::-1]
    assert "set aside t1 attempt 1: guest (it runs again)" in payload
    assert "newest first" in page and "holds every one" not in page


def test_a_long_log_is_read_from_its_end(tmp_path: Path) -> None:
    run_dir = queue_run(tmp_path)
    with (run_dir / "logs" / "queue.jsonl").open("ab") as f:
        for n in range(TIMELINE_EVENTS + 10):
            f.write(orjson.dumps({"at": 2e9 + n, "event": "held", "reason": f"launches held: {n}"}) + b"\n")
    page = render_index(RunData(run_dir), ServedLinks())
    assert f"the last {TIMELINE_EVENTS} events, newest first; logs/queue.jsonl holds every one" in page
    assert f"launches held: {TIMELINE_EVENTS + 9}" in page and "launches held: 9<" not in page
