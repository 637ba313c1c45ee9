"""One call, one generation: `n` and `candidateCount` above 1 are refused (the budget counts calls), and so is
every Gemini `alt` but the `sse` the SDK and Gemini CLI stream with (`alt=proto` answers are not JSON)."""

from __future__ import annotations

import aiohttp
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from hcu.scripted.replies import RawReply

from .conftest import PLACEHOLDER

CHAT = [{"role": "user", "content": "x"}]


async def test_chat_n_above_1_is_refused_and_costs_nothing(upstream, make_gateway):
    gw = await make_gateway("openai", budget=3)
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/n/v1", api_key=PLACEHOLDER, max_retries=0)
    for n in (8, 2, 0):
        with pytest.raises(openai.PermissionDeniedError, match="one generation per call"):
            await client.chat.completions.create(model="m", messages=CHAT, n=n)
    for raw in ('"8"', "1.0", "true", "[1]"):
        async with aiohttp.ClientSession() as s, s.post(
            f"{gw.url}/t/n/v1/chat/completions", data=f'{{"model": "m", "messages": [], "n": {raw}}}'.encode(),
            headers={"Content-Type": "application/json"},
        ) as r:
            assert r.status == 403, raw
    assert upstream.state.requests == []
    for _ in range(3):
        await client.chat.completions.create(model="m", messages=CHAT, n=1)
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(model="m", messages=CHAT)
    assert err.value.status_code == 402
    assert len(upstream.state.requests) == 3
    assert (await gw.task_view("n"))["calls_used"] == 3


async def test_gemini_candidate_count_above_1_is_refused(upstream, make_gateway):
    gw = await make_gateway("gemini", budget=3)
    client = genai.Client(api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{gw.url}/t/c"))
    with pytest.raises(genai_errors.ClientError) as err:
        await client.aio.models.generate_content(
            model="g", contents="x", config=types.GenerateContentConfig(candidate_count=4))
    assert err.value.code == 403 and "candidateCount" in str(err.value)
    one = await client.aio.models.generate_content(
        model="g", contents="x", config=types.GenerateContentConfig(candidate_count=1))
    assert one.text == "ok"
    assert len(upstream.state.requests) == 1


@pytest.mark.parametrize("query", ["alt=proto", "alt=json", "alt=media", "alt=sse&alt=proto", "alt=SSE"])
async def test_gemini_alt_other_than_sse_is_refused(upstream, make_gateway, query):
    gw = await make_gateway("gemini", budget=3)
    async with aiohttp.ClientSession() as s:
        for _ in range(4):
            async with s.post(f"{gw.url}/t/a/v1beta/models/g:streamGenerateContent?{query}",
                              json={"contents": []}) as r:
                assert r.status == 403, query
        async with s.post(f"{gw.url}/t/a/v1beta/models/g:streamGenerateContent?alt=sse",
                          json={"contents": []}) as r:
            assert r.status == 200 and b"finishReason" in await r.read()
    assert len(upstream.state.requests) == 1 and upstream.state.requests[0].query == {"alt": "sse"}
    assert [r.outcome for r in gw.rows()] == ["invalid_request"] * 4 + ["success"]


async def test_a_generation_answered_in_a_form_the_gateway_cannot_read_still_counts(upstream, make_gateway):
    """An upstream's 2xx that is not JSON (a format the gateway does not parse) may be a generation: counted,
    so no format makes answers free."""
    gw = await make_gateway("gemini", budget=1)
    upstream.replies.push(RawReply([b"\x0a\x05hello"], content_type="application/x-protobuf"))
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/p/v1beta/models/g:generateContent", json={"contents": []}) as r:
            assert r.status == 200
        async with s.post(f"{gw.url}/t/p/v1beta/models/g:generateContent", json={"contents": []}) as r:
            assert r.status == 402
    assert [(r.outcome, r.counted) for r in gw.rows()] == [("success", True), ("refused_budget", False)]
