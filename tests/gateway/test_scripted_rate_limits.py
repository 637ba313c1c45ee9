"""The scripted upstream's rate limits (hcu/scripted/rate_limits.py) on a clock the test moves: what a request is
charged, when it is refused and for how long, per deployment, each provider's headers and refusals, compressed
time, and the stream that ends in a rate-limit error event."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp import web

from hcu import REPO_ROOT
from hcu.scripted.rate_limits import RateLimiter, RateLimitSpec, prompt_tokens, reserved_output
from hcu.scripted.replies import TextReply
from hcu.scripted.upstream import QueueResponder, ScriptedUpstream, build_app

from .conftest import _start


class Ticks:
    """Monotonic time that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(ticks: Ticks, **spec: object) -> RateLimiter:
    body = {"deployments": {"*": {"tpm": 1000, "rpm": 5}}, "default_max_tokens": 100, **spec}
    return RateLimiter(RateLimitSpec.model_validate(body), ticks)


@pytest.fixture
async def limited() -> AsyncIterator:
    """A scripted upstream whose limiter reads the test's clock; yields (base URL, ticks, make(spec))."""
    runners: list[web.AppRunner] = []
    ticks = Ticks()

    async def make(**spec: object) -> str:
        state = ScriptedUpstream(QueueResponder(TextReply("ok")), limiter(ticks, **spec))
        runner, port = await _start(build_app(state=state))
        runners.append(runner)
        return f"http://127.0.0.1:{port}"

    yield make, ticks
    for runner in runners:
        await runner.cleanup()


async def post(url: str, body: dict) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as s, s.post(url, data=orjson.dumps(body),
                                                    headers={"Content-Type": "application/json"}) as r:
        return r.status, {k.lower(): v for k, v in r.headers.items()}, await r.read()


def test_a_request_is_charged_its_prompt_and_the_output_it_reserves():
    text = "x" * 400
    assert prompt_tokens({"input": [{"content": text}]}, 1000) == 100
    anthropic_image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 9999}}
    gemini_image = {"inlineData": {"mimeType": "image/png", "data": "A" * 9999}}
    data_url = {"type": "input_image", "image_url": "data:image/png;base64," + "A" * 9999}
    # each image 1000, its other strings by their characters: "image" "base64" "image/png"; "image/png"; "input_image"
    assert [prompt_tokens({"messages": [image]}, 1000) for image in (anthropic_image, gemini_image, data_url)] == [
        1005, 1002, 1002]
    assert reserved_output({"max_output_tokens": 50}, 100) == 50
    assert reserved_output({"max_tokens": 70}, 100) == 70
    assert reserved_output({"generationConfig": {"maxOutputTokens": 30}}, 100) == 30
    assert reserved_output({"model": "m"}, 100) == 100, "without a maximum the default is reserved"


async def test_over_the_tokens_per_minute_a_request_is_refused_until_the_window_frees_it(limited):
    make, ticks = limited
    url = await make() + "/v1/responses"
    body = {"model": "m", "input": "x" * 1199, "max_output_tokens": 100}  # 1200 characters: 300 + 100 tokens
    first = await post(url, body)
    assert first[0] == 200
    assert (first[1]["x-ratelimit-limit-tokens"], first[1]["x-ratelimit-remaining-tokens"]) == ("1000", "600")
    assert (first[1]["x-ratelimit-limit-requests"], first[1]["x-ratelimit-remaining-requests"]) == ("5", "4")
    ticks.now += 10
    assert (await post(url, body))[0] == 200  # 800 of 1000
    ticks.now += 20
    status, headers, data = await post(url, body)
    assert status == 429 and orjson.loads(data)["error"]["code"] == "rate_limit_exceeded"
    assert (headers["retry-after-ms"], headers["retry-after"]) == ("30000", "30"), \
        "the first charge leaves the window 60 s after it arrived, 30 s from now"
    assert headers["x-ratelimit-remaining-tokens"] == "200", "a refused request is not charged"
    ticks.now += 29.9
    assert (await post(url, body))[0] == 429
    ticks.now += 0.2
    status, headers, _ = await post(url, body)
    assert status == 200 and headers["x-ratelimit-remaining-tokens"] == "200"


async def test_requests_per_minute_and_a_window_per_deployment(limited):
    make, ticks = limited
    base = await make(deployments={"dep1": {"rpm": 2}, "*": {"tpm": 100000}})
    small = {"model": "dep1", "input": "x", "max_output_tokens": 1}
    assert [(await post(f"{base}/openai/v1/responses", small))[0] for _ in range(3)] == [200, 200, 429]
    other = {"model": "dep2", "input": "x", "max_output_tokens": 1}
    status, headers, _ = await post(f"{base}/openai/v1/responses", other)
    assert status == 200 and headers["x-ratelimit-remaining-tokens"] == "99998", "dep2 has its own window"
    assert "x-ratelimit-limit-requests" not in headers, "no rpm set for it, none stated"


async def test_time_factor_compresses_the_window(limited):
    make, ticks = limited
    url = await make(time_factor=60) + "/v1/chat/completions"
    # its strings ("m", "user", the content) 3600 characters: 900 tokens, with its output 1000
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 3595}], "max_tokens": 100}
    assert (await post(url, body))[0] == 200
    status, headers, _ = await post(url, body)
    assert status == 429 and headers["retry-after-ms"] == "1000", "a minute of quota lasts a second"
    ticks.now += 1.0
    assert (await post(url, body))[0] == 200


async def test_each_provider_states_and_refuses_its_own_way(limited):
    make, ticks = limited
    base = await make(deployments={"*": {"tpm": 150, "rpm": 9}})
    messages = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    status, headers, _ = await post(f"{base}/v1/messages", messages)
    assert status == 200 and (headers["anthropic-ratelimit-tokens-limit"],
                              headers["anthropic-ratelimit-tokens-remaining"]) == ("150", "49")
    assert headers["anthropic-ratelimit-requests-remaining"] == "8"
    assert not any(name.startswith("x-ratelimit") for name in headers)
    status, headers, data = await post(f"{base}/v1/messages", messages)
    assert status == 429 and headers["retry-after"] == "60" and "retry-after-ms" not in headers
    assert orjson.loads(data)["error"]["type"] == "rate_limit_error"
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 100}}
    url = await make(deployments={"*": {"tpm": 150, "rpm": 9}}) + "/v1beta/models/g:generateContent"
    status, headers, _ = await post(url, gemini)
    assert status == 200 and not any("ratelimit" in name for name in headers), "Gemini sends no limit headers"
    status, headers, data = await post(url, gemini)
    error = orjson.loads(data)["error"]
    assert status == 429 and error["status"] == "RESOURCE_EXHAUSTED" and "retry-after" not in headers
    assert error["details"][0]["retryDelay"] == "60.000s"


async def test_a_stream_over_the_limit_can_end_in_a_rate_limit_event(limited):
    make, ticks = limited
    url = await make(stream_refusal="event", deployments={"*": {"tpm": 150}}) + "/v1/responses"
    body = {"model": "m", "input": "hi", "max_output_tokens": 100, "stream": True}
    assert (await post(url, body))[0] == 200
    ticks.now += 15
    status, headers, data = await post(url, body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    last = orjson.loads(data.strip().split(b"\n")[-1].removeprefix(b"data: "))
    assert last["type"] == "response.failed"
    assert last["response"]["error"]["message"].endswith("try again in 45.000s.")
    status, _, _ = await post(url, {**body, "stream": False})
    assert status == 429, "a request that does not stream is refused with HTTP 429 all the same"


def test_a_bad_rate_limit_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "limits.json"
    bad.write_bytes(orjson.dumps({"deployments": {"*": {"tpm": 0}}}))
    out = subprocess.run([sys.executable, "-m", "hcu.scripted.upstream", "--port", "1", "--rate-limits", str(bad)],
                         capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"--rate-limits: {bad}: deployments.*.tpm: Input should be greater than 0")
