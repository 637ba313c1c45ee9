"""The token log: it fails closed and loses nothing the gateway charged; a log
deleted or moved while in use is put back; counters restore exactly from any log the gateway wrote."""

from __future__ import annotations

import asyncio
import gzip
import random
import resource
import subprocess
import sys

import aiohttp
import orjson
import pytest

from hcu import REPO_ROOT
from hcu.gateway.budget import TaskState
from hcu.gateway.restore import restore
from hcu.gateway.tokenlog import read_token_log

from .conftest import SECRET, free_port, wait_healthy

GEN = {"model": "m", "input": "x"}


def gateway_with_a_file_size_limit(upstream_hostport: str, log, port: int, limit_bytes: int) -> subprocess.Popen:
    """A real gateway process whose writes past `limit_bytes` fail (EFBIG), as on a full disk."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))

    return subprocess.Popen(
        [sys.executable, "-m", "hcu.gateway.openai_proxy", "--host", "127.0.0.1", "--ports", str(port),
         "--upstreams", upstream_hostport, "--upstream-kind", "openai", "--upstream-scheme", "http",
         "--out", str(log), "--max-requests-per-task", "5"],
        # no bytecode writes: they would be cut at the limit and break every later import
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "OSW_OPENAI_UPSTREAM_TOKEN": SECRET, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit,
    )


async def generate(url: str) -> int:
    async with aiohttp.ClientSession() as s, s.post(f"{url}/t/full/v1/responses", json=GEN) as r:
        await r.read()
        return r.status


async def health(url: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/healthz") as r:
        return await r.json()


async def test_an_unwritable_log_fails_closed_and_loses_no_charged_row(tmp_path, upstream):
    log, port = tmp_path / "tokens.jsonl", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = gateway_with_a_file_size_limit(upstream.hostport, log, port, limit_bytes=1200)
    try:
        await asyncio.to_thread(wait_healthy, url, proc)
        statuses = [await generate(url) for _ in range(3)]
        assert statuses == [200, 200, 200], "a delivered generation stays delivered when its row cannot be written"
        token_log = (await health(url))["token_log"]
        assert (token_log["writable"], token_log["pending_rows"]) == (False, 1) and "File too large" in token_log[
            "error"]
        assert await generate(url) == 503, "no new generation while charged rows cannot be written"
        assert len(upstream.state.requests) == 3
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        for _ in range(100):  # the gateway retries on its own; wait for it to say so
            if (await health(url))["token_log"]["writable"]:
                break
            await asyncio.sleep(0.1)
        assert (await health(url))["token_log"]["pending_rows"] == 0
        assert await generate(url) == 200
    finally:
        proc.kill()
        proc.wait(timeout=10)
    rows = read_token_log(log)
    assert [(r.outcome, r.counted, r.calls_used) for r in rows] == [
        ("success", True, 1),
        ("success", True, 2),
        ("success", True, 3),
        ("refused_log", False, 3),
        ("success", True, 4),
    ]
    assert restore(log).tasks["full"].calls_used == 4, "a restart restores every charged call"


@pytest.mark.parametrize("how", ["deleted", "moved"])
async def test_a_log_deleted_or_moved_while_running_is_put_back(upstream, make_gateway, how):
    gw = await make_gateway("openai")
    assert await generate(gw.url) == 200
    if how == "deleted":
        gw.log_path.unlink()
    else:
        gw.log_path.rename(gw.log_path.with_name("moved.jsonl"))
    assert await generate(gw.url) == 200
    assert [r.calls_used for r in gw.rows()] == [1, 2], "the log at its path holds every row again"
    assert (await gw.health())["token_log"]["restored_from_open_file"] == 1


async def test_a_log_replaced_by_another_file_fails_closed(upstream, make_gateway):
    gw = await make_gateway("openai")
    assert await generate(gw.url) == 200
    gw.log_path.rename(gw.log_path.with_name("aside.jsonl"))
    gw.log_path.write_text("")
    assert await generate(gw.url) == 200  # delivered: its row waits in memory
    status = (await gw.health())["token_log"]
    assert (status["writable"], status["pending_rows"]) == (False, 1) and "replaced" in status["error"]
    assert await generate(gw.url) == 503


def row(task: str, outcome: str, counted: bool, **fields: object) -> dict:
    base = {"time": 1.5, "task": task, "provider": "openai", "upstream": "h1", "deployment": None, "model": "m",
            "path": "/v1/responses", "status": 200, "outcome": outcome, "counted": counted, "calls_used": 0,
            "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1, "reasoning_tokens": 0},
            "latency_sec": 0.1, "ttfb_sec": 0.1, "rate_limit_wait_sec": 0.0, "attempts": 1,
            "upstream_request_id": None, "response_id": None}
    return {**base, **fields}


def test_restore_reads_every_layout_the_same_way(tmp_path):
    rows = [
        row("a", "success", True, upstream="h1", deployment="d1"),
        row("a", "failed", False, rate_limit_wait_sec=2.5),
        row("a", "free", False, upstream="h2"),
        row("b", "success", True, model='x","outcome":"success","counted":true,"z":"'),  # a model can say anything
        row("b", "refused_budget", False, usage=None, upstream=None, time=7.25),
        *[row("c", "failed", False, time=9.0 + i) for i in range(5)],
        row("d", "refused_route", False),
        row("e", "success", True, path='/v1/responses,"counted":true'),
        row("f", "rate_limited", False, rate_limit_wait_sec=1.25, deployment="d2"),
        row('q"uote', "success", True, upstream=None),
    ]
    log = tmp_path / "tokens.jsonl"
    lines = [orjson.dumps(r) for r in rows]
    lines[6] = orjson.dumps(rows[6], option=orjson.OPT_INDENT_2).replace(b"\n", b" ")  # another writer's layout
    log.write_bytes(b"\n".join(lines) + b'\n{"time": 3, "task": "a", "outc')  # a torn last line
    got = restore(log)
    assert (got.rows, got.skipped) == (len(rows), 1)
    assert got.tasks == {
        "a": TaskState(calls_used=1, failed_in_a_row=1, rate_limit_wait_sec=2.5, rate_limit_waits=1,
                       last_activity_at=1.5),
        "b": TaskState(calls_used=1, refused=1, last_activity_at=7.25),
        "c": TaskState(failed_in_a_row=5, failed=True, last_activity_at=13.0),
        "e": TaskState(calls_used=1, last_activity_at=1.5),
        "f": TaskState(rate_limit_wait_sec=1.25, rate_limit_waits=1, last_activity_at=1.5),
        'q"uote': TaskState(calls_used=1, last_activity_at=1.5),
    }
    assert got.placements == {"a": ("h1", None), "c": ("h1", None), "e": ("h1", None), "f": ("h1", "d2")}


@pytest.mark.parametrize("chunk_bytes", [700, 64 * 1024, 16 * 1024 * 1024])
def test_restore_matches_replaying_every_row_in_order(tmp_path, chunk_bytes):
    """Rows as the gateway writes them, in a random order of outcomes over a few tasks: whatever the chunking,
    the counters are those of replaying each validated row in order."""
    rng = random.Random(3)
    outcomes = ["success"] * 5 + ["failed"] * 4 + ["rate_limited", "refused_budget", "disconnected", "free"]
    rows = [row(f"t{rng.randrange(12)}.a1", outcome, outcome == "success", time=float(i),
                upstream=rng.choice(["h1", "h2", None]), deployment=rng.choice(["d1", None]),
                rate_limit_wait_sec=rng.choice([0.0, 0.0, 0.0, 1.5]))
            for i, outcome in enumerate(rng.choice(outcomes) for _ in range(3000))]
    log = tmp_path / "tokens.jsonl"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    expected: dict[str, TaskState] = {}
    placements: dict[str, tuple[str, str | None]] = {}
    for r in read_token_log(log):
        if r.outcome in ("free", "refused_route", "invalid_request", "refused_log"):
            continue
        st = expected.setdefault(r.task, TaskState())
        st.record(r.outcome, r.counted, True)
        if r.rate_limit_wait_sec:
            st.rate_limit_wait_sec += r.rate_limit_wait_sec
            st.rate_limit_waits += 1
        st.last_activity_at = r.time
        if r.upstream is not None:
            placements[r.task] = (r.upstream, r.deployment)
        else:
            placements.pop(r.task, None)
    got = restore(log, chunk_bytes=chunk_bytes)
    assert (got.rows, got.skipped) == (3000, 0)
    assert got.tasks == expected and got.placements == placements
    assert any(st.failed for st in expected.values()) and any(st.failed_in_a_row for st in expected.values())


async def test_rows_stay_small_whatever_the_client_sends(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    huge_model = "m" * (4 * 1024 * 1024)
    count = {"model": huge_model, "messages": [{"role": "user", "content": "x"}]}
    packed = gzip.compress(orjson.dumps({"model": "g" * (8 * 1024 * 1024), "max_tokens": 5, "messages": []}))
    assert len(packed) < 16 * 1024
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/r/v1/messages/count_tokens", json=count) as r:
            assert r.status == 200  # free, and its row is no bigger than any other
        async with s.post(f"{gw.url}/t/r/v1/messages", data=packed,
                          headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}) as r:
            await r.read()
        async with s.post(f"{gw.url}/t/r/v1/{'x' * 7000}", json={}) as r:
            assert r.status == 404
    rows = gw.rows()
    assert [r.cut_fields for r in rows] == [{"model": 4 * 1024 * 1024}, {"model": 8 * 1024 * 1024},
                                            {"path": len("/v1/") + 7000}]
    assert all(len(r.model or "") <= 256 and len(r.path) <= 256 for r in rows)
    assert max(len(line) for line in gw.log_path.read_bytes().splitlines()) < 2048
    assert restore(gw.log_path).rows == 3, "cut rows restore like any other"


async def test_a_guest_cannot_write_a_scope_secret_into_the_log(upstream, make_gateway):
    gw = await make_gateway("openai")
    secret = "hcu1-" + "5e" * 32
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/x/v1/{secret}", json={}) as r:
            assert r.status == 404
        async with s.post(f"{gw.url}/t/x/v1/responses/input_tokens", json={"model": f"m {secret}"}) as r:
            await r.read()
    assert secret not in gw.log_path.read_text() and "[scope secret]" in gw.log_path.read_text()
    assert [r.outcome for r in gw.rows()] == ["refused_route", "free"]


def test_restore_reads_the_refusal_counters_and_what_each_scope_got_for_free(tmp_path):
    """Rows of refusals and aggregate rows give each scope's refusals by kind (a generation refused for the budget
    also counts in its task state); free calls, refusals and aggregates give the bytes its ceiling counts, and
    refusal and aggregate rows the bytes of the log's refusal ceiling. Generations count in neither."""
    aggregate = row("a", "refusals", False, upstream=None, usage=None, status=402, time=9.0,
                    refusals={"count": 7, "kinds": {"refused_budget": 5, "refused_flood": 2}, "first": 3.0,
                              "last": 9.0})
    rows = [
        row("a", "success", True),
        row("a", "refused_budget", False, upstream=None, usage=None, status=402, attempts=0),
        aggregate,
        row("a", "free", False),
        row("b", "refused_route", False, upstream=None, usage=None, status=404, attempts=0),
        row("b", "refusals", False, usage=None, refusals={"count": 3, "kinds": {"invalid_request": 3}, "first": 1.0,
                                                          "last": 2.0}),
        row("c", "success", True),
    ]
    lines = [orjson.dumps(r) + b"\n" for r in rows]
    log = tmp_path / "tokens.jsonl"
    log.write_bytes(b"".join(lines))
    got = restore(log)
    assert got.rows == len(rows)
    assert got.refusals == {"a": {"refused_budget": 6, "refused_flood": 2}, "b": {"refused_route": 1,
                                                                                  "invalid_request": 3}}
    assert (got.tasks["a"].calls_used, got.tasks["a"].refused) == (1, 6)
    assert "b" not in got.tasks, "a scope that never generated holds no task state"
    assert got.scope_bytes == {"a": sum(map(len, lines[1:4])), "b": len(lines[4]) + len(lines[5])}
    assert got.refusal_bytes == sum(map(len, lines[1:3])) + len(lines[4]) + len(lines[5])
    assert [r.refusals.count for r in read_token_log(log) if r.refusals] == [7, 3], "readers validate them"
