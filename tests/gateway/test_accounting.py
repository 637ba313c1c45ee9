"""Exact accounting: a generation the upstream completed counts whenever its client left (no free
generations by closing before the final event), a completed answer followed by a late error is a success,
reading after the client left is bounded, only generations enter the five-failures rule, and a request
cancelled while it waits for a budget slot still writes its row."""

from __future__ import annotations

import asyncio
import logging
import socket

import aiohttp
import pytest

from hcu.scripted.replies import Held, HttpFault, RawReply, TextReply, Usage

from .conftest import Gateway, rows_when_written, until

USAGE = Usage(input_tokens=40, cached_input_tokens=10, output_tokens=9, reasoning_tokens=2)
STREAMS = {
    # provider: (path, body, bytes the final success event ends with)
    "openai": ("/v1/responses", {"model": "m", "input": "x", "stream": True}, b"event: response.completed"),
    "chat": ("/v1/chat/completions", {"model": "m", "messages": [], "stream": True}, b"data: [DONE]"),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [], "stream": True},
                  b"event: message_stop"),
    "gemini": ("/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []}, b'"finishReason"'),
}
GATEWAY_OF = {"chat": "openai"}


async def test_a_client_leaving_right_after_the_final_event_is_a_counted_success(upstream, make_gateway):
    for provider in ("openai", "anthropic", "gemini"):
        gw = await make_gateway(provider, budget=5, log_name=f"{provider}.jsonl")
        path, body, final = STREAMS[provider]
        upstream.replies.push(TextReply("all of it", chunks=3, usage=USAGE, hold_open_sec=30))
        async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/left{path}", json=body) as r:
            await r.content.readuntil(final)
            await r.content.readuntil(b"\n\n" if provider != "gemini" else b"\r\n\r\n")
            # the whole answer is here; the upstream keeps its body open for 30 s more, the client goes
        (row,) = await rows_when_written(gw, 1)
        assert (row.outcome, row.counted, row.calls_used) == ("success", True, 1), provider
        assert row.usage is not None and row.usage.output_tokens == 9 and row.usage.input_tokens == 40
        assert (await gw.task_view("left"))["in_flight"] == 0


async def leave_before_the_final_event(gw: Gateway, upstream, provider: str, caplog, task: str = "free") -> None:
    """One stream read up to its final event, then closed; the upstream finishes once the gateway saw the
    client go."""
    path, body, _ = STREAMS[provider]
    held = Held(TextReply("every delta of it", chunks=4, usage=USAGE), asyncio.Event())
    upstream.replies.push(held)
    before = caplog.text.count("the client left mid-generation")
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/{task}{path}", json=body) as r:
        await held.sent.wait()  # everything but the final event is on its way
        await r.content.read(1)
    await until(lambda: caplog.text.count("the client left mid-generation") > before, "the gateway seeing it go")
    held.release.set()


@pytest.mark.parametrize("provider", ["openai", "chat", "anthropic", "gemini"])
async def test_closing_just_before_the_final_event_is_no_free_generation(upstream, make_gateway, provider, caplog):
    caplog.set_level(logging.INFO, "hcu.gateway")
    gw = await make_gateway(GATEWAY_OF.get(provider, provider), budget=3)
    for count in (1, 2, 3):
        await leave_before_the_final_event(gw, upstream, provider, caplog)
        rows = await rows_when_written(gw, count)
        assert (rows[-1].outcome, rows[-1].counted, rows[-1].calls_used) == ("success", True, count)
        assert rows[-1].usage is not None and rows[-1].usage.input_tokens == 40
    path, body, _ = STREAMS[provider]
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/free{path}", json=body) as r:
        assert r.status == 402, "three generations on a budget of three, however their clients left"
    assert len(upstream.state.requests) == 3


LATE_ERRORS = {
    "openai": ("/v1/responses", {"model": "m", "input": "x", "stream": True}, [
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1"}}\n\n',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"hi"}\n\n',
        b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1",'
        b'"status":"completed","usage":{"input_tokens":3,"output_tokens":2}}}\n\n',
        b'event: error\ndata: {"type":"error","code":"server_error","message":"late"}\n\n',
    ]),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [], "stream": True}, [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3}}}'
        b"\n\n",
        b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"hi"}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"late"}}\n\n',
    ]),
    "gemini": ("/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []}, [
        b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],'
        b'"usageMetadata":{"promptTokenCount":3}}\r\n\r\n',
        b'data: {"error":{"code":500,"message":"late","status":"INTERNAL"}}\r\n\r\n',
    ]),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_a_completed_answer_followed_by_a_late_error_is_a_success(upstream, make_gateway, provider):
    gw = await make_gateway(provider, budget=10)
    path, body, chunks = LATE_ERRORS[provider]
    for _ in range(5):
        upstream.replies.push(RawReply(chunks, content_type="text/event-stream"))
        async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/late{path}", json=body) as r:
            assert b"late" in await r.read()
    rows = gw.rows()
    assert {(r.outcome, r.counted) for r in rows} == {("success", True)} and rows[-1].calls_used == 5
    view = await gw.task_view("late")
    assert (view["failed_in_a_row"], view["failed"]) == (0, False)


async def test_a_plain_generation_whose_client_left_counts_when_the_upstream_answers(upstream, make_gateway, caplog):
    caplog.set_level(logging.INFO, "hcu.gateway")
    gw = await make_gateway("openai", budget=1)
    held = Held(TextReply("the whole answer", usage=USAGE), asyncio.Event())
    upstream.replies.push(held)
    async with aiohttp.ClientSession() as s:
        sent = asyncio.create_task(s.post(f"{gw.url}/t/plain/v1/responses", json={"model": "m", "input": "x"}))
        await held.sent.wait()  # the upstream is generating
        sent.cancel()
    await until(lambda: "the client left mid-generation" in caplog.text, "the gateway seeing the client go")
    held.release.set()
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted, row.calls_used) == ("success", True, 1)
    assert row.usage is not None and row.usage.output_tokens == 9


async def test_reading_after_the_client_left_is_bounded_in_time(upstream, make_gateway, caplog):
    caplog.set_level(logging.INFO, "hcu.gateway")
    gw = await make_gateway("anthropic", budget=1, drain_timeout_sec=0.3)
    never = Held(TextReply("an answer the upstream never finishes", chunks=4), asyncio.Event())
    upstream.replies.push(never)
    path, body, _ = STREAMS["anthropic"]
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/bound{path}", json=body) as r:
        await never.sent.wait()
        await r.content.read(1)
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted, row.calls_used) == ("disconnected", False, 0)
    view = await gw.task_view("bound")
    assert (view["in_flight"], view["failed_in_a_row"]) == (0, 0), "the slot is free again, no failure counted"
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/bound{path}", json=body) as r:
        assert r.status == 200 and b"message_stop" in await r.read()


async def test_reading_after_the_client_left_is_bounded_in_size(upstream, make_gateway, caplog):
    caplog.set_level(logging.INFO, "hcu.gateway")
    gw = await make_gateway("openai", budget=1, drain_max_bytes=2000)
    endless = Held(TextReply("x" * 4000, chunks=40), asyncio.Event(), keep_last=42)  # 4 kB still to come
    upstream.replies.push(endless)
    path, body, _ = STREAMS["openai"]
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/size{path}", json=body) as r:
        await endless.sent.wait()
        await r.content.read(1)
    await until(lambda: "the client left mid-generation" in caplog.text, "the gateway seeing the client go")
    endless.release.set()
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted) == ("disconnected", False)
    assert "more bytes without finishing" in caplog.text


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
    holder_reply = Held(TextReply("holding the slot", chunks=4), asyncio.Event())
    upstream.replies.push(holder_reply)
    body = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    async with aiohttp.ClientSession() as s:
        async def first() -> bytes:
            async with s.post(f"{gw.url}/t/w/v1/messages", json=body) as r:
                return await r.read()

        async def second() -> None:
            async with s.post(f"{gw.url}/t/w/v1/messages", json=body) as r:
                await r.read()

        holder = asyncio.create_task(first())
        await holder_reply.sent.wait()  # the first request holds the only slot
        waiter = asyncio.create_task(second())
        await until(lambda: gw.state.budget.view("w").waiting_for_slot == 1, "the second request waiting")
        waiter.cancel()
        await until(lambda: len(gw.rows()) == 1, "the waiter's row")
        holder_reply.release.set()
        assert b"message_stop" in await holder
    rows = await rows_when_written(gw, 2)
    assert [(r.outcome, r.counted, r.attempts) for r in rows] == [
        ("disconnected", False, 0),
        ("success", True, 1),
    ]
    assert len(upstream.state.requests) == 1


async def test_a_client_that_stops_reading_counts_as_gone(upstream, make_gateway, caplog):
    """It cannot hold a stream (and its slot) forever, nor make the generation free by closing much later."""
    caplog.set_level(logging.INFO, "hcu.gateway")
    gw = await make_gateway("openai", budget=1, client_write_timeout_sec=0.3)
    upstream.replies.push(TextReply("y" * (8 * 1024 * 1024), chunks=64, usage=USAGE))
    body = b'{"model": "m", "input": "x", "stream": true}'
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes almost nothing
    host, port = gw.url.removeprefix("http://").split(":")
    sock.connect((host, int(port)))
    sock.sendall(b"POST /t/stall/v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    try:
        (row,) = await rows_when_written(gw, 1)
    finally:
        sock.close()
    assert "left the answer unread" in caplog.text
    assert (row.outcome, row.counted, row.calls_used) == ("success", True, 1)
