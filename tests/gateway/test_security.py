"""The guest is untrusted: only the routes a CLI needs go upstream, client headers outside the provider's API
are dropped, whatever the upstream echoes of the real credential is scrubbed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp import web

from hcu.gateway.credentials import StaticCredential
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.scripted.replies import HttpFault, ScriptedRequest, TextReply

from .conftest import PLACEHOLDER, SECRET


async def raw_request(url: str, method: str, target: str, body: bytes = b"", headers: str = "") -> tuple[int, bytes]:
    """One HTTP/1.1 request with the request target exactly as given (no client-side path normalisation)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    writer.write(head.encode() + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.fixture
async def recording_upstream() -> AsyncIterator[tuple[str, list[tuple[str, str]]]]:
    """A model provider double that records every request it gets, whatever the path, and answers {}."""
    seen: list[tuple[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.rel_url.raw_path))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"127.0.0.1:{runner.addresses[0][1]}", seen
    await runner.cleanup()


OUTSIDE_THE_ALLOW_LIST = {
    "openai": [
        ("DELETE", "/t/x/v1/files/file-abc"),
        ("GET", "/t/x/v1/organization/admin_api_keys"),
        ("POST", "/t/x/v1/batches"),
        ("POST", "/t/x/v1/files"),
        ("GET", "/t/x/v1/responses/resp_123"),
        ("DELETE", "/t/x/v1/responses/resp_123"),
        ("POST", "/t/x/v1/fine_tuning/jobs"),
        ("POST", "/t/x/../../admin"),
        ("POST", "/t/x/v1/../../admin"),
        ("POST", "/t/x/v1/responses/../../admin"),
        ("POST", "/t/x/v1%2fresponses"),
        ("POST", "/t/x/v1/responses%2f..%2f..%2fadmin"),
        ("POST", "/t/x/./v1/responses"),
        ("POST", "/t/../v1/responses"),
        ("PUT", "/t/x/v1/responses"),
        ("HEAD", "/t/x/v1/responses"),
    ],
    "anthropic": [
        ("POST", "/t/x/v1/messages/batches"),
        ("GET", "/t/x/v1/organizations/api_keys"),
        ("POST", "/t/x/v1/files"),
        ("POST", "/t/x/v1/messages/../../admin"),
        ("GET", "/t/x/api/hello"),
    ],
    "gemini": [
        ("POST", "/t/x/v1beta/models/g:batchGenerateContent"),
        ("POST", "/t/x/v1beta/files"),
        ("POST", "/t/x/v1beta/tunedModels"),
        ("DELETE", "/t/x/v1beta/models/g"),
        ("POST", "/t/x/v1beta/models/..%2fcachedContents:generateContent"),
    ],
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_only_allow_listed_routes_go_upstream(make_gateway, recording_upstream, provider):
    hostport, seen = recording_upstream
    gw = await make_gateway(provider, upstreams=hostport)
    if provider != "openai":  # the Anthropic and Gemini gateways take their one upstream as the pool's
        gw.state.pool.upstreams[0].resource = hostport
    for method, target in OUTSIDE_THE_ALLOW_LIST[provider]:
        status, body = await raw_request(gw.url, method, target, b"{}")
        assert status == 404, (method, target)
        if method != "HEAD":
            error = orjson.loads(body)["error"]
            assert "not_found" in orjson.dumps(error).decode(), (method, target, error)
    assert seen == [], "nothing outside the allow-list reached the upstream"
    rows = gw.rows()
    refused = [r for r in rows if r.task == "x"]
    assert {(r.outcome, r.counted, r.attempts, r.upstream) for r in refused} == {("refused_route", False, 0, None)}
    assert gw.state.budget.tasks == {}, "refusals create no task state"


async def test_azure_kind_never_sends_dot_segments(make_gateway, recording_upstream):
    hostport, seen = recording_upstream
    provider = OpenAIProvider(StaticCredential("api-key", SECRET), "http", "azure")
    gw = await make_gateway(provider, upstreams=hostport)
    for target in ("/t/x/../../admin", "/t/x/v1/../../admin", "/t/x/v1/responses/../../../admin"):
        assert (await raw_request(gw.url, "POST", target, b"{}"))[0] == 404
    assert (await raw_request(gw.url, "POST", "/t/x/v1/responses", b'{"model": "m"}'))[0] == 200
    assert seen == [("POST", "/openai/v1/responses")]


async def test_background_execution_is_refused_and_costs_nothing(upstream, make_gateway):
    gw = await make_gateway("openai", budget=3)
    async with aiohttp.ClientSession() as s:
        for _ in range(5):
            async with s.post(f"{gw.url}/t/bg/v1/responses",
                              json={"model": "m", "input": "x", "background": True}) as r:
                assert r.status == 403 and "background" in (await r.json())["error"]["message"]
    assert upstream.state.requests == []
    assert {(r.outcome, r.counted, r.attempts) for r in gw.rows()} == {("invalid_request", False, 0)}
    view = await gw.task_view("bg")
    assert (view["calls_used"], view["failed_in_a_row"], view["failed"]) == (0, 0, False)


async def test_headers_and_query_outside_the_api_are_dropped(upstream, make_gateway):
    gw = await make_gateway("openai")
    headers = {
        "Authorization": f"Bearer {PLACEHOLDER}",
        "Cookie": "session=guest-cookie",
        "OpenAI-Organization": "org-someone-else",
        "OpenAI-Project": "proj-someone-else",
        "X-Forwarded-For": "10.0.0.9",
        "X-Forwarded-Host": "evil.example",
        "Forwarded": "for=10.0.0.9",
        "X-Real-IP": "10.0.0.9",
        "X-Goog-User-Project": "other-project",
        "X-Stainless-Retry-Count": "0",
    }
    query = "api-version=2025-04-01-preview&access_token=tok&key=k&api_key=k2&foo=bar"
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/h/v1/responses?{query}",
                                                    json={"model": "m", "input": "x"}, headers=headers) as r:
        assert r.status == 200
    (seen,) = upstream.state.requests
    dropped = {"cookie", "openai-organization", "openai-project", "x-forwarded-for", "x-forwarded-host",
               "forwarded", "x-real-ip", "x-goog-user-project"}
    assert dropped.isdisjoint(seen.headers), set(seen.headers) & dropped
    assert seen.headers["x-stainless-retry-count"] == "0"  # the API's own headers pass
    assert seen.query == {"api-version": "2025-04-01-preview"}
    assert seen.headers["authorization"] == f"Bearer {SECRET}"


async def test_an_upstream_echoing_the_credential_is_scrubbed(upstream, make_gateway):
    gw = await make_gateway("openai")

    async def echo(req: ScriptedRequest):
        if req.body.get("input") == "fault":
            body = {"error": {"message": f"Incorrect API key provided: {SECRET}.", "code": "invalid_api_key"}}
            return HttpFault(401, body=body, reset_requests=SECRET)
        return TextReply(f"you sent {req.headers['authorization']}", chunks=1)  # an echo is one event

    upstream.state.responder = echo
    blobs: list[bytes] = []
    async with aiohttp.ClientSession() as s:
        for body in ({"input": "fault"}, {"input": "plain"}, {"input": "streamed", "stream": True}):
            async with s.post(f"{gw.url}/t/e/v1/responses", json={"model": "m", **body}) as r:
                blobs.append(await r.read() + repr(r.headers).encode())
        async with s.post(f"{gw.url}/t/e/v1/chat/completions",
                          json={"model": "m", "messages": [], "stream": True}) as r:
            blobs.append(await r.read())
    for blob in blobs:
        assert SECRET.encode() not in blob
        assert b"redacted" in blob
    assert [r.outcome for r in gw.rows()] == ["failed", "success", "success", "success"]
