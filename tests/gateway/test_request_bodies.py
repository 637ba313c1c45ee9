"""Request bodies from a hostile guest: memory bounded by what arrives, a total deadline, every gzip member
decoded and forwarded as checked, and no body two readers could read differently."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from pathlib import Path

import aiohttp
import orjson
import pytest

from hcu.gateway.credentials import StaticCredential
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.scripted.replies import Held, TextReply

from .conftest import PLACEHOLDER, until
from .test_robustness import closed_by_server, connect


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def send_head(url: str, target: str, length: int, first_bytes: bytes = b"") -> tuple:
    reader, writer = await connect(url)
    writer.write(f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode() + first_bytes)
    await writer.drain()
    return reader, writer


async def test_an_announced_body_costs_nothing_until_it_arrives(upstream, make_gateway):
    gw = await make_gateway("openai")
    before = rss_bytes()
    conns = [await send_head(gw.url, "/t/m/v1/responses", 60 * 1024 * 1024, b'{"model"') for _ in range(4)]
    await until(lambda: gw.state.bodies.held.get("127.0.0.1") == 4 * len(b'{"model"'), "four bodies being read")
    assert rss_bytes() - before < 32 * 1024 * 1024, "4 x 60 MB announced, 32 bytes sent: nothing preallocated"
    for _, writer in conns:
        writer.close()
    await until(lambda: not gw.state.bodies.held, "the bodies' memory given back")
    assert upstream.state.requests == []


async def test_a_content_length_over_the_limit_is_refused_at_once(upstream, make_gateway):
    gw = await make_gateway("anthropic")
    reader, _ = await send_head(gw.url, "/t/big/v1/messages", 65 * 1024 * 1024)  # and not one body byte
    assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 413")
    assert await closed_by_server(reader), "the connection is closed: nothing of the body is read after the 413"
    (row,) = gw.rows()
    assert (row.outcome, row.status) == ("invalid_request", 413)


async def test_a_trickled_body_has_a_total_deadline(upstream, make_gateway):
    gw = await make_gateway("openai", body_timeout_sec=0.5)
    reader, writer = await send_head(gw.url, "/t/slow/v1/responses", 1000, b"{")

    async def trickle() -> None:  # one byte every 50 ms: never idle long, never done
        for _ in range(999):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.05)

    sender = asyncio.create_task(trickle())
    try:
        assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 408")
    finally:
        sender.cancel()
    (row,) = await until_rows(gw, 1)
    assert (row.outcome, row.status) == ("invalid_request", 408)


async def until_rows(gw, count: int) -> list:
    await until(lambda: len(gw.rows()) >= count, f"{count} rows")
    return gw.rows()


async def test_one_peer_cannot_hold_more_than_its_share_of_bodies(upstream, make_gateway):
    gw = await make_gateway("openai", body_bytes_per_peer=1024 * 1024)
    held = Held(TextReply("holding the first body"), asyncio.Event())
    upstream.replies.push(held)
    body = orjson.dumps({"model": "m", "input": "x" * 600_000})
    async with aiohttp.ClientSession() as s:
        first = asyncio.create_task(s.post(f"{gw.url}/t/a/v1/responses", data=body,
                                           headers={"Content-Type": "application/json"}))
        await held.sent.wait()  # the first body is held while its generation runs
        async with s.post(f"{gw.url}/t/b/v1/responses", data=body, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 503 and (await r.json())["error"]["code"] == "too_many_request_bodies"
        held.release.set()
        assert (await first).status == 200
        async with s.post(f"{gw.url}/t/b/v1/responses", data=body, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 200, "the share is given back when a request ends"
    assert not gw.state.bodies.held


def members(*parts: bytes) -> bytes:
    return b"".join(gzip.compress(p) for p in parts)


async def post(url: str, data: bytes, encoding: str | None = "gzip", credential: str = PLACEHOLDER):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {credential}"}
    if encoding:
        headers["Content-Encoding"] = encoding
    async with aiohttp.ClientSession() as s, s.post(url, data=data, headers=headers) as r:
        return r.status, await r.read()


async def test_every_gzip_member_is_checked(upstream, make_gateway):
    openai_gw = await make_gateway("openai", log_name="o.jsonl")
    hidden = members(b"", b'{"model": "m", "input": "x", "background": true}')
    status, body = await post(f"{openai_gw.url}/t/g/v1/responses", hidden)
    assert status == 403 and b"background" in body
    gemini_gw = await make_gateway("gemini", log_name="g.jsonl")
    hidden = members(b"", b'{"contents": [], "generationConfig": {"candidateCount": 8}}')
    status, body = await post(f"{gemini_gw.url}/t/g/v1beta/models/g:generateContent", hidden)
    assert status == 403 and b"candidateCount" in body
    assert upstream.state.requests == [], "neither hidden request reached the upstream"
    anthropic_gw = await make_gateway("anthropic", log_name="a.jsonl")
    spread = members(b'{"model": "claude-x", ', b'"max_tokens": 5, "messages": []}')
    assert (await post(f"{anthropic_gw.url}/t/g/v1/messages", spread))[0] == 200
    (seen,) = upstream.state.requests
    assert seen.raw_body == b'{"model": "claude-x", "max_tokens": 5, "messages": []}'
    assert "content-encoding" not in seen.headers, "the upstream gets the decoded bytes the gateway checked"
    assert anthropic_gw.rows()[0].model == "claude-x"


async def test_the_deployment_pin_holds_for_compressed_bodies(upstream, make_gateway):
    provider = OpenAIProvider(StaticCredential("api-key", "azure-key-1"), "http", "azure")
    gw = await make_gateway(provider, upstreams=f"{upstream.hostport}@pinned-dep")
    hidden = members(b"", b'{"model": "guests-own-model", "input": "x"}')
    assert (await post(f"{gw.url}/t/pin/v1/responses", hidden))[0] == 200
    spelled = b'{"Model": "guests-own-model", "input": "x"}'  # another spelling of the field
    assert (await post(f"{gw.url}/t/pin/v1/responses", gzip.compress(spelled)))[0] == 200
    for seen in upstream.state.requests:
        assert orjson.loads(seen.raw_body) == {"input": "x", "model": "pinned-dep"}
        assert "content-encoding" not in seen.headers
    assert {(r.model, r.deployment) for r in gw.rows()} == {("guests-own-model", "pinned-dep")}


@pytest.mark.parametrize(("data", "encoding", "status"), [
    pytest.param(gzip.compress(b"{}") + b"trailing", "gzip", 400, id="gzip-trailing-bytes"),
    pytest.param(gzip.compress(b'{"model": "m"}')[:-6], "gzip", 400, id="gzip-cut-short"),
    pytest.param(zlib.compress(b"{}") + zlib.compress(b"{}"), "deflate", 400, id="deflate-two-streams"),
    pytest.param(gzip.compress(gzip.compress(b"{}")), "gzip, gzip", 415, id="gzip-twice"),
    pytest.param(b"{}", "br", 415, id="brotli"),
    pytest.param(b"{}", "zstd", 415, id="zstd"),
    pytest.param(gzip.compress(b'{"model": "m", "input": "x"}'), "x-gzip", 200, id="x-gzip"),
    pytest.param(b'{"model": "m", "input": "x"}', "identity", 200, id="identity"),
])
async def test_what_cannot_be_decoded_whole_is_refused(upstream, make_gateway, data, encoding, status):
    gw = await make_gateway("openai")
    assert (await post(f"{gw.url}/t/e/v1/responses", data, encoding))[0] == status
    assert len(upstream.state.requests) == (status == 200)


AMBIGUOUS = {
    "openai": ("/v1/responses", [
        b'{"model": "m", "input": "x", "background": true, "background": false}',
        b'{"model": "m", "model": "other", "input": "x"}',
        b'{"model": "m", "input": "x", "background": false, "BACKGROUND": true}',
        b'{"model": "m", "input": "x", "previous_response_id": null, "previousResponseId": "resp_1"}',
        b'{"model": "m", "input": "x", "temperature": NaN}',
        b'{"model": "m", "input": "x", "temperature": 1e400}',
        b'{"model": "m", "input": "\\ud800"}',
        b'\xef\xbb\xbf{"model": "m", "input": "x"}',
        b'{"model": "m", "input": "\xff"}',
        b'{"model": "m", "input": "x"} {"background": true}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"model": "m", "input": "' + b"x" * (2 << 20) + b'", "background": false, "background": true}',  # large
        b'{"model": "m", "input": "' + b"x" * (2 << 20) + b'\\udc00"}',
    ]),
    "gemini": ("/v1beta/models/g:generateContent", [
        b'{"contents": [], "generationConfig": {"candidateCount": 1}, "generation_config": {"candidate_count": 8}}',
        b'{"contents": [], "generationConfig": {"candidateCount": 1, "candidate_count": 8}}',
    ]),
    "anthropic": ("/v1/messages", [
        b'{"model": "m", "max_tokens": 5, "messages": [], "model": "other"}',
    ]),
}


@pytest.mark.parametrize("provider", ["openai", "gemini", "anthropic"])
async def test_bodies_two_readers_could_read_differently_are_refused(upstream, make_gateway, provider):
    gw = await make_gateway(provider)
    path, bodies = AMBIGUOUS[provider]
    for data in bodies:
        status, answer = await post(f"{gw.url}/t/a{path}", data, None)
        assert status == 400, (data[:80], answer)
    assert upstream.state.requests == []
    assert {(r.outcome, r.counted) for r in gw.rows()} == {("invalid_request", False)}


async def test_a_field_spelled_another_way_is_read_as_the_upstream_reads_it(upstream, make_gateway):
    gw = await make_gateway("openai")
    for data in (b'{"model": "m", "input": "x", "Background": true}', b'{"model": "m", "input": "x", "N": 8}'):
        assert (await post(f"{gw.url}/t/s/v1/chat/completions", data, None))[0] == 403
    escaped_emoji = b'{"model": "m", "input": "\\ud83d\\ude00 fine", "background": false, "n": 1}'
    assert (await post(f"{gw.url}/t/s/v1/responses", escaped_emoji, None))[0] == 200
    assert upstream.state.requests[0].body["input"] == "\U0001f600 fine"
