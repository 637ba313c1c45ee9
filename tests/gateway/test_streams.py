"""Upstream faults on the way: mid-stream cuts, hangs (idle timeout), unreachable upstreams."""

from __future__ import annotations

import aiohttp
import anthropic
import openai
import orjson
import pytest

from hcu.gateway.sse import SseParser
from hcu.scripted.replies import CutStream, Hang, RawReply, TextReply

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


PARTIAL = {
    # provider: (path, body, complete events, an event cut in the middle)
    "openai": ("/v1/responses", {"model": "m", "input": "x", "stream": True}, [
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1"}}\n\n',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"one"}\n\n',
    ], b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"unfinished'),
    "chat": ("/v1/chat/completions", {"model": "m", "messages": [], "stream": True}, [
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"one"}}]}\n\n',
    ], b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"unfinished'),
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": [], "stream": True}, [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        b'"text":"one"}}\n\n',
    ], b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"text":"unfinished'),
    "gemini": ("/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []}, [
        b'data: {"candidates":[{"content":{"parts":[{"text":"one"}]}}]}\r\n\r\n',
    ], b'data: {"candidates":[{"content":{"parts":[{"text":"unfinished'),
}


@pytest.mark.parametrize("cut", [True, False], ids=["connection-cut", "clean-end"])
@pytest.mark.parametrize("provider", list(PARTIAL))
async def test_the_error_after_a_cut_starts_on_an_event_boundary(upstream, make_gateway, provider, cut):
    gw = await make_gateway("openai" if provider == "chat" else provider)
    path, body, complete, partial = PARTIAL[provider]
    upstream.replies.push(RawReply([*complete, partial], content_type="text/event-stream", cut=cut))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/cut{path}", json=body) as r:
        data = await r.read()
    forwarded = b"".join(complete)
    assert data.startswith(forwarded) and partial not in data, "the unfinished event is not forwarded"
    error_event = data[len(forwarded):]
    assert b"upstream_disconnected" in error_event and error_event.endswith((b"\n\n", b"\r\n\r\n"))
    assert len(SseParser().feed(data)[0]) == len(complete) + 1, "an SSE reader sees every event, the error whole"
    (row,) = gw.rows()
    assert (row.outcome, row.counted) == ("failed", False)


async def test_sdks_see_the_error_after_a_mid_event_cut(upstream, make_gateway):
    gw = await make_gateway("openai")
    path, body, complete, partial = PARTIAL["chat"]
    upstream.replies.push(RawReply([*complete, partial], content_type="text/event-stream", cut=True))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/cut/v1", api_key=PLACEHOLDER, max_retries=0)
    with pytest.raises(openai.APIError, match="upstream stream ended"):
        async for _ in await client.chat.completions.create(model="m", messages=CHAT["messages"], stream=True):
            pass
    claude = await make_gateway("anthropic", log_name="a.jsonl")
    path, body, complete, partial = PARTIAL["anthropic"]
    upstream.replies.push(RawReply([*complete, partial], content_type="text/event-stream", cut=True))
    sdk = anthropic.AsyncAnthropic(base_url=f"{claude.url}/t/cut", api_key=PLACEHOLDER, max_retries=0)
    with pytest.raises(anthropic.APIStatusError, match="upstream stream ended"):
        async with sdk.messages.stream(model="m", max_tokens=5, messages=CHAT["messages"]) as stream:
            await stream.get_final_message()
