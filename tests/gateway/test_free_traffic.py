"""Free traffic is bounded per scope: a flood of refused requests of every kind leaves the token log within its
bound and the charged rows exact, a flooding scope gets 429 unread while another scope's generations go
through, the ceiling ends only the flooding scope, and a restart restores the refusal counters and the ceiling.

The floods are sent pipelined on one connection (many requests in one write), so tens of thousands take
seconds; the gateway's clock is moved on to end an interval, never waited for."""

from __future__ import annotations

import asyncio
from collections import Counter
from urllib.parse import urlsplit

import aiohttp
import orjson

from hcu.gateway.scope_secret import load_or_create_key, scope_secret

from .conftest import Gateway, until

MESSAGE = orjson.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
KINDS = {  # what a hostile guest sends for free, by the outcome the gateway gives it
    "refused_route": ("POST", "/v1/files", b"{}"),
    "invalid_request": ("POST", "/v1/messages", b"{not json"),
    "refused_budget": ("POST", "/v1/messages", MESSAGE),
    "refused_rate": ("POST", "/v1/messages/count_tokens", MESSAGE),
}


async def pipelined(gw: Gateway, scope: str, method: str, path: str, body: bytes, count: int,
                    headers: str = "") -> tuple[Counter[int], list[dict[str, str]]]:
    """Send `count` requests on one connection, all written before any answer is read; the statuses, and the
    headers of each answer."""
    url = urlsplit(gw.url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    request = (f"{method} /t/{scope}{path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n{headers}"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    writer.write(request * count)
    statuses: Counter[int] = Counter()
    answers = []
    for _ in range(count):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        status_line, *lines = head.strip().split("\r\n")
        fields = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        await reader.readexactly(int(fields["content-length"]))
        statuses[int(status_line.split()[1])] += 1
        answers.append(fields)
    writer.close()
    return statuses, answers


async def generate(gw: Gateway, scope: str) -> int:
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/{scope}/v1/messages", data=MESSAGE,
                                                    headers={"Content-Type": "application/json"}) as r:
        await r.read()
        return r.status


async def test_a_flood_of_every_kind_leaves_the_log_bounded_and_the_charged_rows_exact(upstream, make_gateway):
    """10,000 refused requests of each kind from one scope, in intervals of 500 (below the flood rate, so each
    is refused for what it is): each interval writes its first 10 refusals and one aggregate row; the scope's
    real generations, its free calls within their rate and other scopes' generations each keep their row."""
    gw = await make_gateway("anthropic", budget=2, flood_delay_sec=0)
    assert [await generate(gw, "flood.a1") for _ in range(2)] == [200, 200]
    calm = 0
    for kind, (method, path, body) in KINDS.items():
        for _ in range(20):
            statuses, _ = await pipelined(gw, "flood.a1", method, path, body, 500)
            if kind == "refused_rate":
                assert statuses == {200: 30, 429: 470}, "30 free calls an interval go upstream"
            else:
                assert len(statuses) == 1 and sum(statuses.values()) == 500
            assert await generate(gw, f"calm{calm}.a1") == 200
            calm += 1
            gw.clock.advance(61)
    gw.state.ledger.sweep()  # the last interval has ended: its aggregate row is written
    rows = gw.rows()
    flood = [r for r in rows if r.task == "flood.a1"]
    own = Counter(r.outcome for r in flood)
    assert own == {"success": 2, "free": 20 * 30, "refusals": 4 * 20, **{kind: 20 * 10 for kind in KINDS}}
    aggregated: Counter[str] = Counter()
    for r in flood:
        if r.refusals is not None:
            assert r.refusals.count == sum(r.refusals.kinds.values()) and r.refusals.first <= r.refusals.last
            aggregated.update(r.refusals.kinds)
    refused = {kind: 10_000 for kind in KINDS} | {"refused_rate": 20 * 470}
    assert aggregated == {kind: count - 20 * 10 for kind, count in refused.items()}, \
        "every refusal is in a row of its own or in an aggregate"
    view = await gw.task_view("flood.a1")
    assert view["refusals"] == refused
    assert (view["calls_used"], view["refused"], view["log_ceiling_reached"]) == (2, 10_000, False)
    calm_rows = [(r.task, r.outcome, r.counted, r.calls_used) for r in rows if r.task.startswith("calm")]
    assert calm_rows == [(f"calm{n}.a1", "success", True, 1) for n in range(calm)]
    forwarded = [r for r in rows if r.attempts > 0]
    assert len(upstream.state.requests) == len(forwarded) == 2 + calm + 20 * 30, "only charged rows went upstream"
    assert gw.log_path.stat().st_size < 1024 * 1024, "40,000 refusals take 880 rows, not 40,000 (~14 MB)"


async def test_a_flooding_scope_gets_429_unread_while_another_scope_is_served(upstream, make_gateway):
    """Past 600 refusals in an interval every request of the scope is answered 429 with Retry-After, its body
    unread and nothing forwarded, until the interval ends; meanwhile another scope's generations go through,
    each with its row."""
    gw = await make_gateway("anthropic", budget=5, flood_delay_sec=0)
    flood = asyncio.create_task(pipelined(gw, "flood.a1", "POST", "/v1/files", b"{}", 5000))
    served = [await generate(gw, "calm.a1") for _ in range(5)]
    statuses, answers = await flood
    assert served == [200] * 5
    assert statuses == {404: 600, 429: 4400}
    retry = {int(a["retry-after"]) for a in answers if "retry-after" in a}
    assert retry and all(1 <= seconds <= 60 for seconds in retry)
    statuses, _ = await pipelined(gw, "flood.a1", "POST", "/v1/messages", MESSAGE, 10)
    assert statuses == {429: 10}, "a generation of a flooding scope is not even read"
    assert [r.outcome for r in gw.rows() if r.task == "calm.a1"] == ["success"] * 5
    assert len(upstream.state.requests) == 5
    view = await gw.task_view("flood.a1")
    assert view["flooding"] and view["refusals"] == {"refused_route": 600, "refused_flood": 4410}
    assert (await gw.health())["refusals"]["flooding_scopes"] == ["flood.a1"]
    gw.clock.advance(61)
    assert await generate(gw, "flood.a1") == 200, "the next interval serves the scope again"
    gw.state.ledger.sweep()
    (aggregate,) = [r for r in gw.rows() if r.outcome == "refusals"]
    assert aggregate.refusals.kinds == {"refused_route": 590, "refused_flood": 4410}


async def test_the_ceiling_ends_only_the_flooding_scope(upstream, make_gateway):
    """A scope whose free traffic reaches max_log_bytes_per_scope is served no more (403, counted, no row), and
    /healthz?task= says so; the other scope's generations go on, and its rows are exact."""
    gw = await make_gateway("anthropic", budget=50, flood_delay_sec=0, max_log_bytes_per_scope=8192)
    for _ in range(40):
        await pipelined(gw, "flood.a1", "POST", "/v1/files", b"{}", 50)
        assert await generate(gw, "calm.a1") == 200
        gw.clock.advance(61)
        if (await gw.task_view("flood.a1"))["log_ceiling_reached"]:
            break
    else:
        raise AssertionError("the flooding scope never reached its ceiling")
    view = await gw.task_view("flood.a1")
    assert 8192 <= view["log_bytes"] < 8192 + 2048
    size, ceiling_refusals = gw.log_path.stat().st_size, view["refusals"].get("refused_ceiling", 0)
    statuses, answers = await pipelined(gw, "flood.a1", "POST", "/v1/messages", MESSAGE, 1000)
    assert statuses == {403: 1000} and "retry-after" not in answers[0]
    gw.clock.advance(61)
    gw.state.ledger.sweep()
    assert gw.log_path.stat().st_size == size, "a closed scope writes nothing more"
    assert (await gw.task_view("flood.a1"))["refusals"]["refused_ceiling"] == ceiling_refusals + 1000
    calm = await gw.task_view("calm.a1")
    assert not calm["log_ceiling_reached"] and await generate(gw, "calm.a1") == 200
    calm_rows = [(r.outcome, r.calls_used) for r in gw.rows() if r.task == "calm.a1"]
    assert calm_rows == [("success", n) for n in range(1, len(calm_rows) + 1)]
    assert (await gw.health())["refusals"]["scopes_at_ceiling_shown"] == ["flood.a1"]


async def test_a_restart_after_a_flood_restores_the_counters_and_the_ceiling(upstream, make_gateway):
    """A gateway started on the log a flood wrote has the refusal counters (aggregate rows included), the
    closed scope and the budget of before."""
    first = await make_gateway("anthropic", budget=1, flood_delay_sec=0, max_log_bytes_per_scope=4096)
    assert await generate(first, "calm.a1") == 200
    await pipelined(first, "calm.a1", "POST", "/v1/messages", MESSAGE, 200)  # past the budget: 10 rows + 190
    await pipelined(first, "flood.a1", "POST", "/v1/files", b"{}", 300)
    first.clock.advance(61)
    await pipelined(first, "flood.a1", "POST", "/v1/files", b"{}", 300)
    before = {scope: await first.task_view(scope) for scope in ("calm.a1", "flood.a1")}
    assert before["flood.a1"]["log_ceiling_reached"] and not before["calm.a1"]["log_ceiling_reached"]
    await first.stop()  # writes the aggregate rows of the intervals still open
    second = await make_gateway("anthropic", budget=1, flood_delay_sec=0, max_log_bytes_per_scope=4096)
    after = {scope: await second.task_view(scope) for scope in ("calm.a1", "flood.a1")}
    for scope in after:
        for field in ("calls_used", "refused", "log_ceiling_reached"):
            assert after[scope][field] == before[scope][field], (scope, field)
    assert after["calm.a1"]["refusals"] == {"refused_budget": 200}
    assert after["flood.a1"]["refusals"]["refused_route"] == before["flood.a1"]["refusals"]["refused_route"]
    statuses, _ = await pipelined(second, "flood.a1", "POST", "/v1/files", b"{}", 5)
    assert statuses == {403: 5}, "the scope at its ceiling stays closed"
    assert await generate(second, "calm.a1") == 402, "the budget spent before the restart stays spent"


async def test_refusals_without_the_scope_secret_are_counted_per_peer(upstream, make_gateway, tmp_path):
    """Requests without their scope's secret never touch the scope they name: no row, no state; they count
    against the peer address, which gets 429 once it floods; the scope's own requests are still served."""
    gw = await make_gateway("anthropic", flood_delay_sec=0, scope_key_file=tmp_path / "scope.key")
    statuses, _ = await pipelined(gw, "victim.a1", "POST", "/v1/messages", MESSAGE, 1000,
                                  headers="x-api-key: hcu1-wrong\r\n")
    assert statuses == {403: 600, 429: 400}
    assert gw.rows() == [] and (await gw.health())["refusals"]["by_peer"] == {"127.0.0.1": {"refused_secret": 1000}}
    secret = scope_secret(load_or_create_key(tmp_path / "scope.key"), "victim.a1")
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/victim.a1/v1/messages", data=MESSAGE,
                                                    headers={"x-api-key": secret,
                                                             "Content-Type": "application/json"}) as r:
        assert r.status == 200
    view = await gw.task_view("victim.a1", secret)
    assert view["refusals"] == {} and view["calls_used"] == 1


async def test_past_the_logs_refusal_ceiling_refusals_are_counted_not_written(upstream, make_gateway):
    """Refusal rows of all scopes may take max_refusal_log_bytes; past it they are only counted, every charged
    row is still written, and a withheld row still counts toward its scope's ceiling, which still closes it."""
    gw = await make_gateway("anthropic", flood_delay_sec=0, max_refusal_log_bytes=2000, max_log_bytes_per_scope=6000)
    for interval in range(3):
        for scope in ("one.a1", "two.a1"):
            await pipelined(gw, scope, "POST", "/v1/files", b"{}", 10)
        assert await generate(gw, f"calm{interval}.a1") == 200
        gw.clock.advance(61)
    refusal_rows = [line for line in gw.log_path.read_bytes().splitlines() if b'"outcome":"refused_route"' in line]
    health = (await gw.health())["refusals"]
    assert health["refusal_log_bytes"] == sum(len(line) + 1 for line in refusal_rows) <= 2000
    assert [r.outcome for r in gw.rows() if r.task.startswith("calm")] == ["success"] * 3
    views = [await gw.task_view(scope) for scope in ("one.a1", "two.a1")]
    assert all(v["log_bytes"] >= 6000 and v["log_ceiling_reached"] for v in views), "withheld rows count too"
    assert all(sum(v["refusals"].values()) == 30 and v["refusals"]["refused_ceiling"] > 0 for v in views)
    routes = sum(v["refusals"]["refused_route"] for v in views)
    assert health["refusal_rows_withheld"] == routes - len(refusal_rows) > 0


async def test_requests_abandoned_before_anything_went_upstream_are_free_traffic(upstream, make_gateway):
    """A client that sends half a body and leaves cost nothing upstream: the first ten of an interval keep a row
    each, the rest go into the aggregate row."""
    gw = await make_gateway("anthropic", flood_delay_sec=0)
    url = urlsplit(gw.url)
    for _ in range(15):
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(b"POST /t/leaver.a1/v1/messages HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + MESSAGE[:10])
        await writer.drain()
        writer.close()
    await until(lambda: sum((gw.state.ledger.refusals.totals.get("leaver.a1") or {}).values()) == 15,
                "every abandoned request counted")
    gw.clock.advance(61)
    gw.state.ledger.sweep()
    rows = [r for r in gw.rows() if r.task == "leaver.a1"]
    assert [r.outcome for r in rows] == ["disconnected"] * 10 + ["refusals"]
    assert rows[-1].refusals.kinds == {"disconnected": 5} and upstream.state.requests == []
