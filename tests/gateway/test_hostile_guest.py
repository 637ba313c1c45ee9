"""The attacks together, as a guest would run them against a production setup: scope keys on, Azure's
`host@deployment` pin, budget 3."""

from __future__ import annotations

import asyncio
import gzip
import logging

import aiohttp
import orjson

from hcu.gateway.credentials import StaticCredential
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.gateway.scope_secret import load_or_create_key, scope_secret
from hcu.scripted.replies import Held, TextReply

from .conftest import rows_when_written, until


async def test_no_attack_gets_a_fourth_answer_or_moves_the_pin(upstream, make_gateway, tmp_path, caplog):
    caplog.set_level(logging.INFO, "hcu.gateway")
    key_file = tmp_path / "scope.key"
    provider = OpenAIProvider(StaticCredential("api-key", "azure-key-1"), "http", "azure")
    gw = await make_gateway(provider, budget=3, scope_key_file=key_file, upstreams=f"{upstream.hostport}@pinned")
    scope = "run.task.a1"
    auth = {"Authorization": f"Bearer {scope_secret(load_or_create_key(key_file), scope)}"}
    url = f"{gw.url}/t/{scope}/v1/responses"
    attacks = [
        gzip.compress(b"") + gzip.compress(b'{"model": "mine", "input": "x", "background": true}'),
        b'{"model": "mine", "input": "x", "background": false, "background": true}',
        b'{"model": "mine", "input": "x", "Background": true}',
        b'{"model": "mine", "input": "x", "n": 8}',
    ]
    async with aiohttp.ClientSession() as s:
        for data in attacks:
            headers = {**auth, "Content-Type": "application/json", "X-HTTP-Method-Override": "GET"}
            if data.startswith(b"\x1f\x8b"):
                headers["Content-Encoding"] = "gzip"
            async with s.post(url, data=data, headers=headers) as r:
                assert r.status in (400, 403), data
        for count in (1, 2, 3):  # each answer read but its final event, then the connection closed
            held = Held(TextReply("an answer", chunks=3), asyncio.Event())
            upstream.replies.push(held)
            before = caplog.text.count("the client left mid-generation")
            hidden = gzip.compress(b"") + gzip.compress(b'{"model": "mine", "input": "x", "stream": true}')
            async with s.post(url, data=hidden, headers={**auth, "Content-Encoding": "gzip"}) as r:
                await held.sent.wait()
                await r.content.read(1)
            await until(lambda n=before: caplog.text.count("the client left mid-generation") > n, "the client gone")
            held.release.set()
            await until(lambda n=count: sum(r.counted for r in gw.rows()) == n, f"{count} counted")
        async with s.post(url, json={"model": "mine", "input": "x"}, headers=auth) as r:
            assert r.status == 402
    assert [orjson.loads(r.raw_body)["model"] for r in upstream.state.requests] == ["pinned"] * 3
    assert all("x-http-method-override" not in r.headers for r in upstream.state.requests)
    rows = await rows_when_written(gw, 8)
    assert [(r.outcome, r.model, r.deployment) for r in rows if r.counted] == [("success", "mine", "pinned")] * 3
