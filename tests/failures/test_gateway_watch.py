"""How the agent phase reads the gateway: absence tolerated for a bounded time, the
rate-limit wait in progress counted, a turn's end judged from the gateway's rows, a scope the
gateway closed at its token-log ceiling ending the attempt as guest_flood. The clock is
injected; the gateway that does not answer is a closed port."""

from __future__ import annotations

import socket
from pathlib import Path

import orjson
import pytest
import requests

from hcu.gateway.budget import TaskStateView
from hcu.osworld.attempt.failures import translate
from hcu.osworld.attempt.gateway_watch import Clock, GatewayWatch, RateLimitWaits
from hcu.osworld.errors import GatewayError, GuestFloodError, policy_for
from hcu.osworld.records.usage import last_generation_outcome, usage_for_scope
from tests.gateway.conftest import free_port, start_gateway_process, wait_healthy


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


def test_a_scope_closed_at_its_token_log_ceiling_ends_the_attempt_as_guest_flood(tmp_path: Path) -> None:
    """a real gateway with a 2 KB ceiling: the scope that floods it with refused requests is closed, its watch
    ends the attempt as guest_flood (withheld, not retried); another scope's watch goes on."""
    port, log = free_port(), tmp_path / "tokens.jsonl"
    proc = start_gateway_process(
        "anthropic_proxy", ["--host", "127.0.0.1", "--port", str(port), "--out", str(log),
                            "--max-requests-per-task", "5", "--max-log-bytes-per-scope", "2048", "--flood-delay", "0"],
        env={"OSW_ANTHROPIC_UPSTREAM_BASE": f"http://127.0.0.1:{closed_port()}",
             "OSW_ANTHROPIC_UPSTREAM_TOKEN": "never-used-upstream-token"})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        flood, calm = (GatewayWatch(url, scope, away_sec=60) for scope in ("run.flood.a1", "run.calm.a1"))
        assert flood.poll() is not None and calm.poll() is not None
        with requests.Session() as s:
            statuses = [s.post(f"{url}/t/run.flood.a1/v1/files", json={}, timeout=5).status_code for _ in range(20)]
        assert statuses[0] == 404 and statuses[-1] == 403, "refused, then closed at the ceiling"
        with pytest.raises(GuestFloodError, match=r"ceiling of scope run.flood.a1 \(2\d{3} bytes; "
                           rf"{statuses.count(403)} refused_ceiling, {statuses.count(404)} refused_route\)"):
            flood.poll()
        assert calm.poll() is not None and not calm.last.log_ceiling_reached
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    failure = translate(GuestFloodError("closed"), "probe")
    policy = policy_for(failure.classification)
    assert failure.classification == "guest_flood" and not policy.retry and not policy.scored
    assert usage_for_scope(log, "run.flood.a1").requests == statuses.index(403), "each refusal before it closed"
