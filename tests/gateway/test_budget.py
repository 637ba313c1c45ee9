"""Budget: successes only, exact under concurrency, refusal without contacting the upstream."""

from __future__ import annotations

import asyncio

import aiohttp
import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from hcu.scripted.replies import CutStream, Held, HttpFault, TextReply

from .conftest import PLACEHOLDER, rows_when_written


async def test_refusal_is_provider_shaped_402_and_never_reaches_upstream(upstream, make_gateway):
    for provider in ("openai", "anthropic", "gemini"):
        gw = await make_gateway(provider, budget=1, log_name=f"{provider}.jsonl")
        before = len(upstream.state.requests)
        if provider == "openai":
            client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/a/v1", api_key=PLACEHOLDER, max_retries=0)
            await client.responses.create(model="m", input="x")
            with pytest.raises(openai.APIStatusError) as err:
                await client.responses.create(model="m", input="x", stream=True)
            assert err.value.status_code == 402 and "max_model_calls" in str(err.value)
        elif provider == "anthropic":
            client = anthropic.AsyncAnthropic(base_url=f"{gw.url}/t/a", api_key=PLACEHOLDER, max_retries=0)
            kwargs = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
            await client.messages.create(**kwargs)
            with pytest.raises(anthropic.APIStatusError) as err:
                await client.messages.create(**kwargs)
            assert err.value.status_code == 402 and "max_model_calls" in str(err.value)
            # token counting stays free and still works after the budget is spent
            assert (await client.messages.count_tokens(model="m", messages=kwargs["messages"])).input_tokens
        else:
            client = genai.Client(
                api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{gw.url}/t/a")
            )
            await client.aio.models.generate_content(model="g", contents="x")
            with pytest.raises(genai_errors.ClientError) as err:
                await client.aio.models.generate_content(model="g", contents="x")
            assert err.value.code == 402 and "max_model_calls" in str(err.value)
        generations = [r for r in upstream.state.requests[before:] if not r.count_tokens]
        assert len(generations) == 1, provider
        rows = gw.rows()
        assert (rows[1].outcome, rows[1].status, rows[1].attempts, rows[1].upstream) == (
            "refused_budget",
            402,
            0,
            None,
        )
        assert (await gw.task_view("a"))["refused"] == 1


async def test_budget_0_is_no_budget(upstream, make_gateway):
    """max_model_calls 0 means no budget, at the gateway too: every call goes through."""
    gw = await make_gateway("openai", budget=0)
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/a/v1", api_key=PLACEHOLDER, max_retries=0)
    for _ in range(3):
        await client.responses.create(model="m", input="x")
    assert [(r.outcome, r.counted, r.calls_used) for r in gw.rows()] == [
        ("success", True, 1), ("success", True, 2), ("success", True, 3)]
    view = await gw.task_view("a")
    assert (view["calls_used"], view["refused"], view["in_flight"]) == (3, 0, 0)


async def test_budget_exact_with_50_concurrent_streams_over_10_tasks(upstream, make_gateway):
    """Per task: 5 concurrent streams, budget 3, and the first stream of each task is cut mid-way (free).
    Exactly 3 successes per task, the 5th request refused, 4 upstream generations per task."""
    gw = await make_gateway("openai", budget=3)
    tasks = [f"task{i}" for i in range(10)]
    for task in tasks:
        upstream.replies.push(
            CutStream(after_events=4, reply=TextReply("x", event_delay_sec=0.02)), task=task
        )
        upstream.replies.push(*[TextReply("y", chunks=3, event_delay_sec=0.01)] * 4, task=task)

    async def one(task: str) -> str:
        client = openai.AsyncOpenAI(
            base_url=f"{gw.url}/t/{task}/v1",
            api_key=PLACEHOLDER,
            max_retries=0,
            default_headers={"x-task-id": task},
        )
        try:
            async with client.responses.stream(model="m", input="x") as stream:
                await stream.get_final_response()
            return "ok"
        except openai.APIStatusError as exc:
            return str(exc.status_code)
        except (openai.APIError, RuntimeError):
            return "broken"

    results = await asyncio.gather(*[one(t) for t in tasks for _ in range(5)])
    assert sorted(set(results)) == ["402", "broken", "ok"]
    assert (results.count("ok"), results.count("broken"), results.count("402")) == (30, 10, 10)
    assert len(upstream.state.requests) == 40
    rows = gw.rows()
    for task in tasks:
        mine = [r for r in rows if r.task == task]
        assert sorted(r.outcome for r in mine) == [
            "failed",
            "refused_budget",
            "success",
            "success",
            "success",
        ]
        assert max(r.calls_used for r in mine) == 3 and sum(r.counted for r in mine) == 3
        view = await gw.task_view(task)
        assert (view["calls_used"], view["in_flight"], view["refused"]) == (3, 0, 1)


async def test_five_failures_in_a_row_mark_the_task_failed_and_rate_limits_do_not_count(
    upstream, make_gateway
):
    gw = await make_gateway("openai", max_wait=0.0)
    client = openai.AsyncOpenAI(base_url=f"{gw.url}/t/f/v1", api_key=PLACEHOLDER, max_retries=0)
    upstream.replies.push(
        *[HttpFault(500)] * 4, HttpFault(429, retry_after="5"), TextReply(), *[HttpFault(500)] * 5
    )
    statuses = []
    for _ in range(6):
        try:
            raw = await client.responses.with_raw_response.create(model="m", input="x")
            statuses.append(raw.status_code)
        except openai.APIStatusError as exc:
            statuses.append(exc.status_code)
    assert statuses == [500] * 4 + [429, 200]
    view = await gw.task_view("f")
    assert (view["failed_in_a_row"], view["failed"], view["calls_used"]) == (0, False, 1)
    for _ in range(5):
        with pytest.raises(openai.APIStatusError):
            await client.responses.create(model="m", input="x")
    view = await gw.task_view("f")
    assert (view["failed_in_a_row"], view["failed"]) == (5, True)
    assert [r.outcome for r in gw.rows()][:6] == ["failed"] * 4 + ["rate_limited", "success"]


async def test_a_client_leaving_mid_stream_still_spends_the_call_the_upstream_completed(upstream, make_gateway):
    gw = await make_gateway("anthropic", budget=1)
    held = Held(TextReply("slow " * 20, chunks=20), asyncio.Event(), keep_last=10)
    upstream.replies.push(held)
    body = {"model": "m", "max_tokens": 5, "messages": [], "stream": True}
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/d/v1/messages", json=body) as r:
        await r.content.readuntil(b"content_block_delta")
        # leaving the block closes the connection mid-stream
    held.release.set()
    (row,) = await rows_when_written(gw, 1)
    assert (row.outcome, row.counted, row.calls_used) == ("success", True, 1)
    view = await gw.task_view("d")
    assert (view["calls_used"], view["in_flight"], view["failed_in_a_row"]) == (1, 0, 0)
    client = anthropic.AsyncAnthropic(base_url=f"{gw.url}/t/d", api_key=PLACEHOLDER, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as err:
        await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 402
