"""Headers each way: nothing that could reroute a request behind the upstream's address goes up, nothing
hop-by-hop crosses, and an answer in an encoding the gateway cannot read never reaches the client."""

from __future__ import annotations

import gzip
import zlib

import aiohttp
import pytest

from hcu.scripted.replies import RawReply

from .conftest import SECRET

REROUTING = {
    "X-HTTP-Method-Override": "DELETE",
    "X-HTTP-Method": "DELETE",
    "X-Method-Override": "DELETE",
    "X-Original-URL": "/v1/files",
    "X-Rewrite-URL": "/v1/files",
    "X-Original-Method": "DELETE",
    "X-Override-Path": "/v1/files",
    "X-Envoy-Original-Path": "/v1/files",
    "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA",
    "Proxy-Connection": "keep-alive",
    "X-Goog-FieldMask": "candidates.content",
    "Content-Encoding": "identity",
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_headers_that_reroute_or_are_hop_by_hop_never_go_upstream(upstream, make_gateway, provider):
    gw = await make_gateway(provider)
    path, body = {
        "openai": ("/v1/responses", {"model": "m", "input": "x"}),
        "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": []}),
        "gemini": ("/v1beta/models/g:generateContent", {"contents": []}),
    }[provider]
    headers = {**REROUTING, "Connection": "keep-alive, X-Named-Hop, anthropic-beta", "X-Named-Hop": "1",
               "anthropic-beta": "dropped-as-named", "X-Stainless-Retry-Count": "0", "Content-Type": "text/plain"}
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/h{path}", json=body, headers=headers) as r:
        assert r.status == 200
    (seen,) = upstream.state.requests
    leaked = {name.lower() for name in [*REROUTING, "X-Named-Hop", "anthropic-beta"]} & set(seen.headers)
    assert leaked == set()
    assert seen.headers["x-stainless-retry-count"] == "0", "the API's own headers pass"
    assert seen.headers["content-type"] == "application/json", "the body goes as the JSON the gateway read"


async def test_headers_the_upstreams_connection_names_stay_there(upstream, make_gateway):
    gw = await make_gateway("openai")
    upstream.replies.push(RawReply([b'{"id": "resp_1", "object": "response", "status": "completed"}'],
                                   headers={"Connection": "keep-alive, X-Upstream-Hop", "X-Upstream-Hop": "1",
                                            "X-Kept": "1"}))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/h/v1/responses", json={"model": "m"}) as r:
        assert r.status == 200 and r.headers["x-kept"] == "1" and "x-upstream-hop" not in r.headers


ENCODED = {
    "x-gzip": gzip.compress,
    "br": lambda data: data,  # aiohttp here cannot decode brotli or zstd: refused whatever the bytes are
    "gzip, gzip": lambda data: gzip.compress(gzip.compress(data)),
    "zstd": lambda data: data,
    "compress": zlib.compress,
}


@pytest.mark.parametrize("encoding", list(ENCODED))
@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_the_gateway_cannot_decode_never_reaches_the_client(upstream, make_gateway, encoding, stream):
    gw = await make_gateway("openai")
    if stream:
        plain = f'event: response.output_text.delta\ndata: {{"delta": "echo {SECRET}"}}\n\n'.encode()
    else:
        plain = f'{{"id": "resp_1", "object": "response", "status": "completed", "echo": "{SECRET}"}}'.encode()
    upstream.replies.push(RawReply([ENCODED[encoding](plain)], headers={"Content-Encoding": encoding},
                                   content_type="text/event-stream" if stream else "application/json"))
    async with aiohttp.ClientSession(auto_decompress=False) as s, s.post(
        f"{gw.url}/t/enc/v1/responses", json={"model": "m", "stream": stream},
    ) as r:
        answer = await r.read()
        assert r.status == 502  # "cannot read", or for br/zstd aiohttp's own refusal to set up a decoder
    assert SECRET.encode() not in answer and plain not in answer
    assert ENCODED[encoding](plain) not in answer
    (row,) = gw.rows()
    assert (row.outcome, row.counted) == ("failed", False)


async def test_an_answer_aiohttp_decoded_is_scrubbed(upstream, make_gateway):
    gw = await make_gateway("openai")
    plain = f'{{"id": "resp_1", "object": "response", "status": "completed", "echo": "{SECRET}"}}'.encode()
    upstream.replies.push(RawReply([gzip.compress(plain)], headers={"Content-Encoding": "gzip"}))
    async with aiohttp.ClientSession() as s, s.post(f"{gw.url}/t/enc/v1/responses", json={"model": "m"}) as r:
        answer = await r.read()
        assert r.status == 200 and "content-encoding" not in r.headers
    assert SECRET.encode() not in answer and b"redacted" in answer
