"""Exact accounting (issue 10, items 5-7): a delivered generation counts even if its client leaves before the
upstream closes; only generations enter the five-failures rule; a request cancelled while it waits for a
budget slot still writes its row."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from hcu.scripted.replies import HttpFault, TextReply, Usage

from .conftest import Gateway

USAGE = Usage(input_tokens=40, cached_input_tokens=10, output_tokens=9, reasoning_tokens=2)
STREAMS = {
    # provider: (path, body, bytes the final success event ends with)
    "openai": ("/v1/responses", {"model": "m", "input": "x", "stream": True}, b"event: response.completed"),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [], "stream": True},
                  b"event: message_stop"),
    "gemini": ("/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []}, b'"finishReason"'),
}


async def rows_when_written(gw: Gateway, count: int) -> list:
    for _ in range(200):
        if len(rows := gw.rows()) >= count:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} rows, got {gw.rows()}")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_a_client_leaving_right_after_the_final_event_is_a_counted_success(upstream, make_gateway, provider):
    gw = await make_gateway(provider, budget=5)
    path, body, final = STREAMS[provider]
    upstream.replies.push(TextReply("all of it", chunks=3, usage=USAGE, hold_open_sec=30))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/left{path}", json=body) as r:
        await r.content.readuntil(final)
        await r.content.readuntil(b"\n\n" if provider != "gemini" else b"\r\n\r\n")
        # the whole answer is here; the upstream keeps its body open for 30 s more, the client goes
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted, row.calls_used) == ("success", True, 1)
    assert row.usage is not None and row.usage.output_tokens == 9 and row.usage.input_tokens == 40
    assert (await gw.task_view("left"))["in_flight"] == 0


async def test_a_client_leaving_before_the_final_event_is_free(upstream, make_gateway):
    gw = await make_gateway("openai", budget=5)
    upstream.replies.push(TextReply("slow " * 10, chunks=10, event_delay_sec=0.2))
    body = {"model": "m", "input": "x", "stream": True}
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/early/v1/responses", json=body) as r:
        await r.content.readuntil(b"output_text.delta")
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted, row.calls_used) == ("disconnected", False, 0)


async def test_only_generations_enter_the_five_failures_rule(upstream, make_gateway):
    gw = await make_gateway("openai")
    async with aiohttp.ClientSession() as s:
        for _ in range(5):
            async with s.get(f"{gw.url}/t/f/v1/models", data=b"{malformed") as r:
                assert r.status == 400
            async with s.post(f"{gw.url}/t/f/v1/responses", data=b"{malformed") as r:
                assert r.status == 400
            async with s.post(f"{gw.url}/t/f/v1/responses/input_tokens", json={"model": "m", "input": "x"}) as r:
                assert r.status == 404  # the scripted upstream has no such endpoint: a failed free call
            async with s.post(f"{gw.url}/t/f/v1/files", json={}) as r:
                assert r.status == 404
    view = await gw.task_view("f")
    assert (view["failed_in_a_row"], view["failed"], view["calls_used"]) == (0, False, 0)
    upstream.replies.push(HttpFault(500))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/f/v1/responses", json={"model": "m"}) as r:
        assert r.status == 500
    assert (await gw.task_view("f"))["failed_in_a_row"] == 1  # a failed generation still counts


async def test_a_request_cancelled_while_waiting_for_a_slot_writes_its_row(upstream, make_gateway):
    gw = await make_gateway("anthropic", budget=1)
    upstream.replies.push(TextReply("holding the slot", chunks=4, event_delay_sec=0.3))
    body = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    async with aiohttp.ClientSession() as s:
        async def first() -> bytes:
            async with s.post(f"{gw.url}/t/w/v1/messages", json=body) as r:
                return await r.read()

        async def second() -> None:
            async with s.post(f"{gw.url}/t/w/v1/messages", json=body) as r:
                await r.read()

        holder = asyncio.create_task(first())
        await asyncio.sleep(0.2)  # the first request holds the only slot
        waiter = asyncio.create_task(second())
        await asyncio.sleep(0.3)  # the second waits for it
        waiter.cancel()
        assert b"message_stop" in await holder
    rows = await rows_when_written(gw, 2)
    assert sorted((r.outcome, r.counted, r.attempts) for r in rows) == [
        ("disconnected", False, 0),
        ("success", True, 1),
    ]
    assert len(upstream.state.requests) == 1
