"""What the upstreams' answers say of their rate limits, per upstream in `/healthz` (`upstream_limits`), from each
provider's headers (Gemini sends none, and /healthz says so); and the per-scope rate-limit waits of
`/healthz?waits=<prefix>`, a wait in progress counted up to now. The upstream is the scripted one with its
quotas (hcu/scripted/rate_limits.py) on the gateway's own test clock."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from hcu.gateway.observed_limits import read_limits
from hcu.scripted.rate_limits import RateLimiter, RateLimitSpec
from hcu.scripted.replies import HttpFault, RawReply, TextReply

from .conftest import PLACEHOLDER, ManualClock, until

SPEC = RateLimitSpec(deployments={"*": {"tpm": 50000, "rpm": 60}}, default_max_tokens=1000)


async def healthz(url: str, **params: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/healthz", params=params) as r:
        return await r.json()


async def generate(provider: str, url: str) -> None:
    """One generation through the gateway with the provider's own SDK."""
    if provider == "openai":
        client = openai.AsyncOpenAI(base_url=f"{url}/t/r.t.a1/v1", api_key=PLACEHOLDER, max_retries=0)
        await client.responses.create(model="m", input="hello", max_output_tokens=500)
    elif provider == "anthropic":
        an = anthropic.AsyncAnthropic(base_url=f"{url}/t/r.t.a1", api_key=PLACEHOLDER, max_retries=0)
        await an.messages.create(model="m", max_tokens=500, messages=[{"role": "user", "content": "hello"}])
    else:
        client = genai.Client(api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{url}/t/r.t.a1"))
        await client.aio.models.generate_content(model="g", contents="hello")


async def test_each_provider_s_limits_are_reported_per_upstream(upstream, make_gateway):
    for provider in ("openai", "anthropic", "gemini"):
        upstream.state.limiter = RateLimiter(SPEC)
        gw = await make_gateway(provider, log_name=f"{provider}.jsonl")
        before = await healthz(gw.url)
        assert before["upstream_limits"] == {upstream.hostport: None}, "nothing seen before the first answer"
        began = gw.clock.time()
        await generate(provider, gw.url)
        after = await healthz(gw.url)
        seen = after["upstream_limits"][upstream.hostport]
        if provider == "gemini":
            assert seen is None and "no rate-limit headers" in after["upstream_limits_note"]
            continue
        assert after["upstream_limits_note"] is None
        charged = 50000 - seen["tokens"]["remaining"]
        assert seen["tokens"]["limit"] == 50000 and 500 < charged < 600, "the prompt and its 500 reserved"
        assert seen["requests"]["limit"] == 60 and seen["requests"]["remaining"] < 60
        assert began <= seen["seen_at"] <= gw.clock.time()


def test_anthropic_s_input_and_output_limits_and_partial_headers():
    headers = {"anthropic-ratelimit-input-tokens-limit": "40000", "anthropic-ratelimit-input-tokens-remaining": "39000",
               "anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-requests-remaining": "49"}
    seen = read_limits("anthropic", headers, 5.0)
    assert seen is not None and seen.tokens is None and seen.seen_at == 5.0
    assert (seen.input_tokens.limit, seen.input_tokens.remaining) == (40000, 39000)
    assert (seen.output_tokens.limit, seen.output_tokens.remaining, seen.requests.remaining) == (8000, None, 49)
    assert read_limits("openai", {"x-ratelimit-remaining-tokens": "12"}, 1.0).tokens.remaining == 12
    assert read_limits("openai", {"x-ratelimit-remaining-tokens": "lots"}, 1.0) is None
    assert read_limits("gemini", {"x-ratelimit-remaining-tokens": "12"}, 1.0) is None


async def test_an_answer_without_limit_headers_keeps_the_last_ones(upstream, make_gateway):
    gw = await make_gateway("openai")
    upstream.state.limiter = RateLimiter(SPEC)
    await generate("openai", gw.url)
    first = (await healthz(gw.url))["upstream_limits"][upstream.hostport]
    upstream.replies.push(RawReply([b'{"error": {"message": "boom", "code": "server_error"}}'], status=500))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/r.t.a1/v1", api_key=PLACEHOLDER, max_retries=0)
    with pytest.raises(openai.InternalServerError):
        await client.responses.create(model="m", input="x")
    assert (await healthz(gw.url))["upstream_limits"][upstream.hostport]["tokens"] == first["tokens"]


async def test_rate_limit_waits_per_scope_count_a_wait_in_progress(upstream, make_gateway):
    clock = ManualClock()
    clock.gate = asyncio.Event()
    gw = await make_gateway("openai", clock=clock)
    upstream.replies.push(HttpFault(429, retry_after="5"), TextReply("done"))
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/run1.t.a1/v1", api_key=PLACEHOLDER, max_retries=0)
    call = asyncio.create_task(client.responses.create(model="m", input="x"))
    await until(lambda: gw.state.budget.state("run1.t.a1").waiting_now, "the gateway waiting out the 429")
    clock.advance(2.0)
    waits = (await healthz(gw.url, waits="run1."))["rate_limit_waits"]
    assert list(waits) == ["run1.t.a1"] and waits["run1.t.a1"]["waiting_now"] == 1
    assert 2.0 <= waits["run1.t.a1"]["wait_sec"] < 3.0, "the wait so far, before it ended"
    assert (await healthz(gw.url, waits="run2."))["rate_limit_waits"] == {}
    assert "rate_limit_waits" not in await healthz(gw.url), "only when asked"
    clock.gate.set()
    assert (await call).output_text == "done"
    ended = (await healthz(gw.url, waits=""))["rate_limit_waits"]["run1.t.a1"]
    assert ended == {"wait_sec": 5.0, "waits": 1, "waiting_now": 0}


async def test_the_gateway_waits_out_the_scripted_quota(upstream, make_gateway):
    """The limiter's window runs on the gateway's clock: the 429's retry-after-ms is waited out exactly."""
    clock = ManualClock()
    upstream.state.limiter = RateLimiter(RateLimitSpec(deployments={"*": {"tpm": 1000}}), clock.monotonic)
    gw = await make_gateway("openai", clock=clock, max_wait=120)
    await generate("openai", gw.url)  # its prompt and 500 reserved: about 500 of the 1000
    started = time.monotonic()
    await generate("openai", gw.url)  # as much again does not fit until the first charge leaves the window
    (waited,) = clock.sleeps
    assert 59.0 <= waited <= 60.0 and time.monotonic() - started < 10, "the window's rest, on the test clock"
    rows = gw.rows()
    assert [row.outcome for row in rows] == ["success", "success"] and rows[1].rate_limit_wait_sec == waited
