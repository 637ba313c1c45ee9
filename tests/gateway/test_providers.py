"""The official SDKs and the CLIs' exact paths through real gateways, streaming and not."""

from __future__ import annotations

import aiohttp
import anthropic
import openai
import orjson
from google import genai
from google.genai import types

from hcu.scripted.replies import TextReply, ToolCall, ToolCallReply, Usage

from .conftest import PLACEHOLDER, SECRET


def openai_client(gw, task: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{gw.url}/t/{task}/v1", api_key=PLACEHOLDER, max_retries=0)


async def test_openai_responses_plain_and_streamed(upstream, make_gateway):
    gw = await make_gateway("openai")
    usage = Usage(input_tokens=100, cached_input_tokens=40, output_tokens=30, reasoning_tokens=20)
    upstream.replies.push(
        TextReply("hello there", usage=usage),
        ToolCallReply([ToolCall("click", {"x": 1}, "call_1", {"namespace": "mcp__cu"})], usage=usage),
    )
    client = openai_client(gw, "t1")
    plain = await client.responses.create(model="gpt-x", input="hi")
    assert plain.output_text == "hello there"
    async with client.responses.stream(model="gpt-x", input="hi") as stream:
        final = await stream.get_final_response()
    call = final.output[0]
    assert (call.type, call.name, call.call_id, orjson.loads(call.arguments)) == (
        "function_call",
        "click",
        "call_1",
        {"x": 1},
    )
    assert call.model_dump()["namespace"] == "mcp__cu"
    rows = gw.rows()
    assert [(r.outcome, r.counted, r.calls_used, r.status) for r in rows] == [
        ("success", True, 1, 200),
        ("success", True, 2, 200),
    ]
    for row in rows:
        assert row.usage is not None and row.usage.model_dump() == {
            "input_tokens": 100,
            "cached_input_tokens": 40,
            "cache_write_input_tokens": 0,
            "output_tokens": 30,
            "reasoning_tokens": 20,
        }
        assert row.response_id and row.response_id.startswith("resp_") and row.upstream_request_id
        assert row.model == "gpt-x" and row.path == "/v1/responses" and row.ttfb_sec is not None
    seen = upstream.state.requests
    assert [r.headers["authorization"] for r in seen] == [f"Bearer {SECRET}"] * 2
    assert all(PLACEHOLDER not in str(r.headers) for r in seen)


async def test_codex_path_with_api_version_and_grok_chat(upstream, make_gateway):
    gw = await make_gateway("openai")
    async with aiohttp.ClientSession() as s, s.post(
        f"{gw.url}/t/codex/v1/responses?api-version=2025-04-01-preview",
        json={"model": "m", "input": "x", "stream": True},
        headers={"Authorization": f"Bearer {PLACEHOLDER}", "accept-encoding": "zstd,gzip"},
    ) as r:
        body = await r.read()
        assert r.status == 200 and b"response.completed" in body and "content-encoding" not in r.headers
    assert upstream.state.requests[-1].path == "/v1/responses"
    assert upstream.state.requests[-1].query == {"api-version": "2025-04-01-preview"}
    assert upstream.state.requests[-1].headers["accept-encoding"] == "identity"
    client = openai_client(gw, "grok")
    upstream.replies.push(
        ToolCallReply([ToolCall("use_tool", {"tool_name": "cu__screenshot"}, "c9")], text="ok")
    )
    chat = await client.chat.completions.create(model="grok", messages=[{"role": "user", "content": "x"}])
    assert chat.choices[0].message.tool_calls[0].function.name == "use_tool"
    chunks = [
        c
        async for c in await client.chat.completions.create(
            model="grok",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    rows = gw.rows()
    assert [(r.task, r.path, r.outcome) for r in rows] == [
        ("codex", "/v1/responses", "success"),
        ("grok", "/v1/chat/completions", "success"),
        ("grok", "/v1/chat/completions", "success"),
    ]
    assert rows[2].usage is not None and rows[2].usage.output_tokens == 7


async def test_anthropic_sdk_and_claude_code_path(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    client = anthropic.AsyncAnthropic(base_url=f"{gw.url}/t/claude", api_key=PLACEHOLDER, max_retries=0)
    upstream.replies.push(
        TextReply("hi", usage=Usage(50, 20, 9)),
        ToolCallReply([ToolCall("mcp__cu__click", {"x": 3}, "toolu_1")]),
    )
    msg = await client.messages.create(
        model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert msg.content[0].text == "hi"
    async with client.messages.stream(
        model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].type == "tool_use" and final.content[0].input == {"x": 3}
    counted = await client.messages.count_tokens(
        model="claude-x", messages=[{"role": "user", "content": "x"}]
    )
    assert counted.input_tokens > 0
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{gw.url}/t/claude/v1/messages?beta=true",
            headers={"X-Api-Key": PLACEHOLDER, "anthropic-beta": "interleaved-thinking"},
            json={"model": "claude-x", "max_tokens": 5, "messages": [], "stream": True},
        ) as r,
    ):
        assert r.status == 200 and b"message_stop" in await r.read()
    last = upstream.state.requests[-1]
    assert last.query == {"beta": "true"} and last.headers["anthropic-beta"] == "interleaved-thinking"
    for req in upstream.state.requests:
        assert req.headers["x-api-key"] == SECRET and "authorization" not in req.headers
    rows = gw.rows()
    assert [(r.outcome, r.counted) for r in rows] == [
        ("success", True),
        ("success", True),
        ("free", False),
        ("success", True),
    ]
    assert rows[0].usage.model_dump() == {
        "input_tokens": 50,
        "cached_input_tokens": 20,
        "cache_write_input_tokens": 0,
        "output_tokens": 9,
        "reasoning_tokens": 0,
    }
    assert rows[-1].calls_used == 3


async def test_gemini_sdk_and_gemini_cli_path(upstream, make_gateway):
    gw = await make_gateway("gemini")
    client = genai.Client(api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{gw.url}/t/gem"))
    upstream.replies.push(
        TextReply("plain answer", usage=Usage(30, 10, 8, 3)),
        ToolCallReply([ToolCall("mcp_cu_click", {"x": 2})], text="calling"),
    )
    plain = await client.aio.models.generate_content(model="gemini-x", contents="hi")
    assert plain.text == "plain answer"
    parts = []
    async for chunk in await client.aio.models.generate_content_stream(model="gemini-x", contents="hi"):
        parts += chunk.candidates[0].content.parts
    assert [p.function_call.name for p in parts if p.function_call] == ["mcp_cu_click"]
    tokens = await client.aio.models.count_tokens(model="gemini-x", contents="hi")
    assert tokens.total_tokens > 0
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{gw.url}/t/gem/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key={PLACEHOLDER}",
            headers={"x-goog-api-key": PLACEHOLDER},
            json={"contents": []},
        ) as r,
    ):
        assert r.status == 200 and b"STOP" in await r.read()
    last = upstream.state.requests[-1]
    assert last.path == "/v1beta/models/gemini-x:streamGenerateContent" and last.query == {"alt": "sse"}
    assert all(r.headers["x-goog-api-key"] == SECRET for r in upstream.state.requests)
    rows = gw.rows()
    assert [(r.outcome, r.model) for r in rows] == [
        ("success", "gemini-x"),
        ("success", "gemini-x"),
        ("free", "gemini-x"),
        ("success", "gemini-x"),
    ]
    assert rows[0].usage.model_dump() == {
        "input_tokens": 30,
        "cached_input_tokens": 10,
        "cache_write_input_tokens": 0,
        "output_tokens": 8,
        "reasoning_tokens": 3,
    }


async def test_routing_healthz_and_malformed_body(upstream, make_gateway):
    gw = await make_gateway("openai", budget=7)
    async with aiohttp.ClientSession() as s:
        for path in ("/v1/responses", "/t/", "/t/x", "/other"):
            async with s.post(gw.url + path, json={}) as r:
                assert r.status == 404, path
        async with s.post(f"{gw.url}/t/bad/v1/responses", data=b"{not json") as r:
            assert r.status == 400 and "error" in await r.json()
        async with s.get(f"{gw.url}/healthz") as r:
            health = await r.json()
        async with s.get(f"{gw.url}/healthz", params={"task": "nobody"}) as r:
            unknown = (await r.json())["task"]
    assert health == {
        "status": "up",
        "provider": "openai",
        "max_requests_per_task": 7,
        "rate_limit_max_wait": 30.0,
        "upstreams": [upstream.hostport],
        "tasks": 0,
        "scope_secrets": False,
        "scope_key_id": None,
        "token_log": {"writable": True, "pending_rows": 0, "dropped_rows": 0, "error": None,
                      "restored_from_open_file": 0},
        "upstream_limits": {upstream.hostport: None},
        "upstream_limits_note": None,
        "refusals": {
            "interval_sec": 60.0, "total": {"invalid_request": 1}, "scopes": 1,
            "top_scopes": {"bad": {"invalid_request": 1}}, "flooding": 0, "flooding_scopes": [],
            "by_peer": {"127.0.0.1": {"refused_scope": 4}}, "max_log_bytes_per_scope": 1024 * 1024,
            "scopes_at_ceiling": 0, "scopes_at_ceiling_shown": [], "refusal_rows_withheld": 0,
            "refusal_log_bytes": gw.log_path.stat().st_size, "max_refusal_log_bytes": 64 * 1024 * 1024,
        },
    }
    assert unknown == {
        "task": "nobody",
        "calls_used": 0,
        "in_flight": 0,
        "failed_in_a_row": 0,
        "failed": False,
        "rate_limit_wait_sec": 0.0,
        "rate_limit_waits": 0,
        "waiting_now": False,
        "waiting_for_slot": 0,
        "refused": 0,
        "last_activity_at": None,
        "refusals": {},
        "flooding": False,
        "log_bytes": 0,
        "log_ceiling_reached": False,
    }
    assert upstream.state.requests == []
    assert [(r.task, r.status, r.outcome, r.counted) for r in gw.rows()] == [
        ("bad", 400, "invalid_request", False)
    ]
