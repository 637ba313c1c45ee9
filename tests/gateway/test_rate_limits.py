"""Rate limits are waited out and resent before the client sees them; preamble hold; giving up."""

from __future__ import annotations

import time
from email.utils import formatdate

import aiohttp
import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from hcu.gateway.backoff import hint_from_headers, parse_duration
from hcu.scripted.replies import HttpFault, StreamError, TextReply

from .conftest import PLACEHOLDER


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-tokens": "250ms"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_hints(headers, expected):
    assert hint_from_headers(headers) == expected


def test_http_date_hint_and_durations():
    now = 1_800_000_000.0
    assert hint_from_headers({"retry-after": formatdate(now + 10, usegmt=True)}, now) == 10.0
    assert (parse_duration("1h2m3.5s"), parse_duration("6m0s"), parse_duration("x1s")) == (
        3723.5,
        360.0,
        None,
    )


@pytest.mark.parametrize(
    "make_fault",
    [
        lambda: HttpFault(429, retry_after="0.3"),
        lambda: HttpFault(429, retry_after=formatdate(time.time() + 2, usegmt=True)),
        lambda: HttpFault(429, retry_after_ms=300),
        lambda: HttpFault(429, reset_tokens="300ms", reset_requests="100ms"),
    ],
    ids=["seconds", "http-date", "ms", "reset-headers"],
)
async def test_openai_429_is_waited_out_and_resent(upstream, make_gateway, make_fault):
    gw = await make_gateway("openai")
    fault = make_fault()
    upstream.replies.push(fault, fault, TextReply("done"))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/r/v1", api_key=PLACEHOLDER, max_retries=0)
    assert (await client.responses.create(model="m", input="x")).output_text == "done"
    (row,) = gw.rows()
    assert (row.outcome, row.counted, row.attempts) == ("success", True, 3)
    assert 0.4 <= row.rate_limit_wait_sec <= 3 and row.latency_sec >= row.rate_limit_wait_sec
    view = await gw.task_view("r")
    assert (view["rate_limit_waits"], view["calls_used"], view["waiting_now"]) == (2, 1, False)


async def test_openai_stream_rate_limit_before_content_is_retried_without_lifecycle_error(upstream, make_gateway):
    """The preamble (response.created/in_progress) of the failed attempt never reaches the SDK, so its
    stream helper does not see a second response identity."""
    gw = await make_gateway("openai")
    upstream.replies.push(
        StreamError("rate_limit"),
        StreamError("rate_limit", openai_event="error"),
        TextReply("after retry", chunks=4),
    )
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/s/v1", api_key=PLACEHOLDER, max_retries=0)
    async with client.responses.stream(model="m", input="x") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "after retry"
    (row,) = gw.rows()
    assert (row.outcome, row.attempts, row.response_id) == ("success", 3, final.id)
    assert row.rate_limit_wait_sec > 0  # "try again in 1s" from the error message, else backoff


async def test_anthropic_529_and_overloaded_stream_event_are_retried(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    upstream.replies.push(HttpFault(529, retry_after="0.1"), StreamError("overloaded"), TextReply("fine"))
    client = anthropic.AsyncAnthropic(base_url=f"{gw.url}/t/c", api_key=PLACEHOLDER, max_retries=0)
    async with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
        final = await s.get_final_message()
    assert final.content[0].text == "fine"
    (row,) = gw.rows()
    assert (row.outcome, row.attempts) == ("success", 3)


async def test_gemini_resource_exhausted_with_retry_info_is_retried(upstream, make_gateway):
    gw = await make_gateway("gemini")
    upstream.replies.push(
        HttpFault(429, retry_delay="0.2s"), StreamError("rate_limit", retry_delay="0.2s"), TextReply("gem")
    )
    client = genai.Client(api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{gw.url}/t/g"))
    text = "".join([c.text async for c in await client.aio.models.generate_content_stream(model="g", contents="x")])
    assert text == "gem"
    (row,) = gw.rows()
    assert (row.outcome, row.attempts, row.rate_limit_wait_sec) == ("success", 3, 0.4)


async def test_giving_up_after_max_wait_returns_429_with_retry_after(upstream, make_gateway):
    gw = await make_gateway("openai", max_wait=1.0)
    upstream.replies.push(*[HttpFault(429, retry_after="0.6")] * 3)
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{gw.url}/t/q/v1/responses", json={"model": "m", "input": "x"}) as r,
    ):
        assert r.status == 429 and r.headers["retry-after"] == "1"
        assert (await r.json())["error"]["code"] == "rate_limit_exceeded"
    (row,) = gw.rows()
    assert (row.outcome, row.counted, row.attempts, row.rate_limit_wait_sec) == (
        "rate_limited",
        False,
        2,
        0.6,
    )
    view = await gw.task_view("q")
    assert (view["failed_in_a_row"], view["calls_used"], view["rate_limit_wait_sec"]) == (0, 0, 0.6)


async def test_a_rate_limit_after_content_is_forwarded_and_stays_a_rate_limit(upstream, make_gateway):
    """Too late to resend, but still a rate limit: not a failed generation, so five of them
    in a row do not fail the task. A server error after content is a failed generation."""
    gw = await make_gateway("anthropic")
    body = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    for _ in range(5):
        upstream.replies.push(StreamError("overloaded", partial=TextReply("partial answer", chunks=1)))
        async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/e/v1/messages", json=body) as r:
            data = await r.read()
        assert r.status == 200 and b"partial answer" in data and b"overloaded_error" in data
        assert data.count(b"event: message_start") == 1 and b"message_stop" not in data
    assert {(row.outcome, row.counted, row.attempts) for row in gw.rows()} == {("rate_limited", False, 1)}
    view = await gw.task_view("e")
    assert (view["failed_in_a_row"], view["failed"], view["calls_used"]) == (0, False, 0)
    upstream.replies.push(StreamError("server", partial=TextReply("partial answer", chunks=1)))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/e/v1/messages", json=body) as r:
        await r.read()
    assert (gw.rows()[-1].outcome, (await gw.task_view("e"))["failed_in_a_row"]) == ("failed", 1)


async def test_insufficient_quota_429_is_not_waited_out(upstream, make_gateway):
    gw = await make_gateway("openai")
    quota = {"error": {"code": "insufficient_quota", "type": "insufficient_quota", "message": "billing"}}
    upstream.replies.push(HttpFault(429, retry_after="5", body=quota))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/b/v1/responses", json={"model": "m"}) as r:
        assert r.status == 429 and (await r.json()) == quota
    (row,) = gw.rows()
    assert (row.outcome, row.attempts, row.rate_limit_wait_sec) == ("failed", 1, 0.0)


async def test_non_generation_calls_pass_through_free(upstream, make_gateway):
    gw = await make_gateway("openai", budget=1)
    async with aiohttp.ClientSession() as s:
        for _ in range(6):
            async with s.get(f"{gw.url}/t/g/v1/models") as r:
                assert r.status == 404  # the scripted upstream has no model list; the answer passes through
    assert {(r.outcome, r.counted, r.status) for r in gw.rows()} == {("free", False, 404)}
    view = await gw.task_view("g")
    assert (view["failed_in_a_row"], view["failed"], view["calls_used"]) == (0, False, 0)


async def test_chat_stream_rate_limit_after_the_role_chunk_is_retried(upstream, make_gateway):
    gw = await make_gateway("openai")
    upstream.replies.push(StreamError("rate_limit"), TextReply("after", chunks=1))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/grok/v1", api_key=PLACEHOLDER, max_retries=0)
    chunks = [
        c
        async for c in await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
    ]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "after"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1  # one opener, not two
    (row,) = gw.rows()
    assert (row.outcome, row.attempts) == ("success", 2)
