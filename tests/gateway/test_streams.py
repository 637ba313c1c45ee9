"""Upstream faults on the way: mid-stream cuts, hangs (idle timeout), unreachable upstreams."""

from __future__ import annotations

import aiohttp
import openai
import orjson
import pytest

from hcu.scripted.replies import CutStream, Hang, TextReply

from .conftest import PLACEHOLDER, free_port

CHAT = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}


async def test_upstream_cut_mid_stream_ends_client_stream_with_error_event(upstream, make_gateway):
    gw = await make_gateway("openai")
    upstream.replies.push(CutStream(after_events=3, reply=TextReply("a b c d e f", chunks=6)))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/cut/v1/chat/completions", json=CHAT) as r:
        data = await r.read()
    events = [line[6:] for line in data.split(b"\n") if line.startswith(b"data: ")]
    assert r.status == 200 and len(events) == 4 and b"[DONE]" not in data
    assert orjson.loads(events[-1])["error"]["code"] == "upstream_disconnected"
    (row,) = gw.rows()
    assert (row.outcome, row.counted, row.calls_used, row.status) == ("failed", False, 0, 200)


async def test_openai_sdk_sees_an_error_not_an_empty_success_after_a_cut(upstream, make_gateway):
    gw = await make_gateway("openai")
    upstream.replies.push(CutStream(after_events=5, reply=TextReply("never finished", chunks=4)))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/cut/v1", api_key=PLACEHOLDER, max_retries=0)
    with pytest.raises(openai.APIError, match="upstream stream ended"):
        async with client.responses.stream(model="m", input="x") as stream:
            await stream.get_final_response()
    assert [r.outcome for r in gw.rows()] == ["failed"]


async def test_hang_before_headers_hits_idle_timeout(upstream, make_gateway):
    gw = await make_gateway("openai", idle_timeout=0.5)
    upstream.replies.push(Hang())
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/h/v1/responses", json={"model": "m"}) as r:
        assert r.status == 504 and (await r.json())["error"]["code"] == "upstream_unavailable"
    (row,) = gw.rows()
    assert (row.outcome, row.status, row.counted) == ("failed", 504, False)


async def test_stalled_stream_hits_idle_timeout(upstream, make_gateway):
    gw = await make_gateway("anthropic", idle_timeout=0.5)
    upstream.replies.push(TextReply("slow", chunks=2, event_delay_sec=1.0))
    body = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/h/v1/messages", json=body) as r:
        data = await r.read()
    assert r.status == 200 and data.endswith(b"\n\n") and b"upstream_disconnected" in data
    assert [r.outcome for r in gw.rows()] == ["failed"]


async def test_unreachable_upstream_is_502(make_gateway):
    gw = await make_gateway("gemini", upstreams=f"127.0.0.1:{free_port()}")
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{gw.url}/t/u/v1beta/models/g:generateContent", json={"contents": []}) as r,
    ):
        assert r.status == 502 and (await r.json())["error"]["status"] == "upstream_unavailable"
    (row,) = gw.rows()
    assert (row.outcome, row.attempts) == ("failed", 5)  # the first try and four connection retries
