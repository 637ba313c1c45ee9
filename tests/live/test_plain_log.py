"""The plain-line log (output that is not a terminal): one line per event of the real queue, in the order the
queue decided them, and a summary line every minute of the queue's clock. The real queue and run directory on a
clock the test moves; an in-memory executor whose attempts last a set time on that clock."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from hcu.osworld.live.plain import PlainLog, event_line
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.run_queue import left_running
from tests.queue.test_launch_pacing import POLL_SEC, MovingClock, TimedExecutor, config

GUEST_FAIL = {"status": "error", "score": None, "failure_classification": "guest"}


def test_one_line_per_event_in_order_and_a_summary_every_minute(tmp_path: Path) -> None:
    clock = MovingClock()
    out = io.StringIO()
    tasks = [f"t{i}" for i in range(6)]
    run_queue(config(tmp_path, tasks, max_active_tasks=2, launch_stagger_seconds=0), clock=clock,
              executor=TimedExecutor(clock, {("t1", 1): GUEST_FAIL}), poll_interval_sec=POLL_SEC,
              sinks=[PlainLog(out)])
    lines = out.getvalue().splitlines()
    events = [orjson.loads(line) for line in (tmp_path / "pacing" / "logs" / "queue.jsonl").read_bytes().splitlines()]
    told = [line for line in lines if " summary: " not in line]
    assert told == [event_line(e) for e in events], "one line per event, in the queue's order"
    words = [line.split(" ", 2)[1] for line in told]
    assert words[:4] == ["queue", "limit", "launch", "launch"]
    assert "finish t1 attempt 1: failed (infrastructure; set aside)" in "\n".join(told)
    assert "set aside t1 attempt 1: guest (it runs again)" in "\n".join(told)
    assert "finish t0 attempt 1: finished, score 1" in "\n".join(told)
    assert words.count("launch") == 7 and words.count("finish") == 7
    assert told[-1].endswith("done: every repeat final (6 finished)")
    summaries = [line for line in lines if " summary: " in line]
    minutes = (events[-1]["at"] - events[0]["at"]) // 60  # 7 attempts of 25 s, two at once
    assert len(summaries) == minutes + 1, "one a minute, and the last figures as the queue exits"
    assert summaries[-1].endswith("limit 2 at once (max_active_tasks)")
    assert "6 of 6 repeats final (6 finished); 0 running, 0 to start" in summaries[-1]
    assert "score 1.000 (95% 0.610 to 1.000, wilson); 6 of 6 repeats scored (100.0% coverage)" in summaries[-1]


def test_a_log_whose_reader_went_away_does_not_stop_the_queue(tmp_path: Path) -> None:
    clock = MovingClock()
    out = io.StringIO()
    out.close()  # writing raises ValueError, as a closed pipe raises OSError
    assert run_queue(config(tmp_path, ["t0"], max_active_tasks=1), clock=clock,
                     executor=TimedExecutor(clock, {}), poll_interval_sec=POLL_SEC,
                     sinks=[PlainLog(out)]) == {"t0": "finished"}


def test_ctrl_c_says_what_it_leaves_running(tmp_path: Path) -> None:
    clock = MovingClock()
    clock.stop_at = clock.now + 10  # stopped (as by Ctrl-C) while two attempts run
    cfg = config(tmp_path, ["t0", "t1", "t2"], max_active_tasks=2, launch_stagger_seconds=0)
    with pytest.raises(KeyboardInterrupt):
        run_queue(cfg, clock=clock, executor=TimedExecutor(clock, {}), poll_interval_sec=POLL_SEC)
    assert left_running(cfg) == "attempts still running: 2 (launching 2)"
    assert left_running(None) == "running attempts continue"
