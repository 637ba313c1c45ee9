"""How the agent phase reads the gateway: absence tolerated for a bounded time, the
rate-limit wait in progress counted, a turn's end judged from the gateway's rows. The clock
is injected; the gateway that does not answer is a closed port."""

from __future__ import annotations

import socket
from pathlib import Path

import orjson
import pytest

from hcu.gateway.budget import TaskStateView
from hcu.osworld.attempt.gateway_watch import Clock, GatewayWatch, RateLimitWaits
from hcu.osworld.errors import GatewayError
from hcu.osworld.records.usage import last_generation_outcome


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> Clock:
        return Clock(monotonic=lambda: self.now, sleep=lambda seconds: None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_gateway_may_be_away_for_gateway_away_seconds() -> None:
    """a missed poll or a restart is tolerated; only an absence longer than the bound ends the attempt."""
    time = FakeTime()
    watch = GatewayWatch(f"http://127.0.0.1:{closed_port()}", "run.task.a1", away_sec=60, clock=time.clock())
    assert watch.poll() is None
    time.now += 59.9
    assert watch.poll() is None and watch.last == TaskStateView(task="run.task.a1")
    time.now += 0.2
    with pytest.raises(GatewayError, match=r"away for more than 60 s \(gateway_away_seconds\)"):
        watch.poll()


def test_a_wait_in_progress_counts_from_the_poll_that_saw_it() -> None:
    """the gateway adds a wait to rate_limit_wait_sec only when it ends; the running one counts too."""
    waits = RateLimitWaits()
    assert waits.seconds(TaskStateView(task="t", rate_limit_wait_sec=5.0, rate_limit_waits=1), now=100) == 5.0
    waiting = TaskStateView(task="t", rate_limit_wait_sec=5.0, rate_limit_waits=1, waiting_now=True)
    assert waits.seconds(waiting, now=110) == 5.0
    assert waits.seconds(waiting, now=150) == 45.0
    next_wait = TaskStateView(task="t", rate_limit_wait_sec=50.0, rate_limit_waits=2, waiting_now=True)
    assert waits.seconds(next_wait, now=160) == 50.0, "the finished wait is the gateway's; the next one starts"
    assert waits.seconds(next_wait, now=170) == 60.0
    done = TaskStateView(task="t", rate_limit_wait_sec=62.0, rate_limit_waits=3)
    assert waits.seconds(done, now=171) == 62.0


def row(task: str, at: float, outcome: str) -> bytes:
    return orjson.dumps({"time": at, "task": task, "provider": "openai", "path": "/v1/responses", "status": 200,
                         "outcome": outcome, "counted": outcome == "success", "calls_used": 0,
                         "latency_sec": 0.1}) + b"\n"


def test_how_a_turn_ended_upstream_is_the_gateways_last_row(tmp_path: Path) -> None:
    """the last generation of the scope since the turn began, as the gateway logged it."""
    log = tmp_path / "tokens.jsonl"
    log.write_bytes(row("s.a1", 10, "rate_limited") + row("s.a1", 20, "success") + row("other.a1", 21, "failed")
                    + row("s.a1", 22, "rate_limited") + row("s.a1", 23, "free"))
    assert last_generation_outcome(log, "s.a1", since=15) == "rate_limited"
    assert last_generation_outcome(log, "s.a1", since=21.5) == "rate_limited"
    assert last_generation_outcome(log, "s.a1", since=30) is None
    assert last_generation_outcome(log, "other.a1", since=0) == "failed"
    assert last_generation_outcome(None, "s.a1", since=0) is None
