"""Azure kind (paths, Entra credential refresh), deployment cooldowns, resource affinity, pinned resources."""

from __future__ import annotations

import asyncio
import gzip
import time

import aiohttp
import openai
import orjson
import pytest
from azure.core.credentials import AccessToken

from hcu.defaults import GATEWAY
from hcu.gateway.clock import SYSTEM_CLOCK, Clock
from hcu.gateway.credentials import AZURE_SCOPE, AzureTokenCredential, StaticCredential
from hcu.gateway.openai_proxy import OpenAIProvider
from hcu.gateway.pool import Pool, UpstreamSpecError, parse_upstreams
from hcu.scripted.replies import HttpFault

from .conftest import PLACEHOLDER, ManualClock


class FakeEntraCredential:
    """Implements azure-identity's `get_token(*scopes) -> AccessToken` protocol, on the test's clock."""

    def __init__(self, lifetime_sec: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.lifetime_sec, self.clock = lifetime_sec, clock
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs) -> AccessToken:
        time.sleep(0.05)  # azure-identity blocks; the gateway must keep serving meanwhile
        self.scopes.append(scopes)
        return AccessToken(f"entra-token-{len(self.scopes)}", int(self.clock.time() + self.lifetime_sec))


def azure(credential, clock: Clock = SYSTEM_CLOCK) -> OpenAIProvider:
    return OpenAIProvider(AzureTokenCredential(credential, clock=clock), "http", "azure")


def client(gw, task: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{gw.url}/t/{task}/v1", api_key=PLACEHOLDER, max_retries=0)


async def test_azure_paths_and_token_refresh(upstream, make_gateway):
    clock = ManualClock()
    fake = FakeEntraCredential(lifetime_sec=302, clock=clock)  # refreshed 300 s before expiry: good for ~2 s
    hp = upstream.hostport
    gw = await make_gateway(azure(fake, clock), upstreams=f"{hp},{hp}@gpt-dep", clock=clock)
    await asyncio.gather(*[client(gw, f"t{i}").responses.create(model="m", input="x") for i in range(6)])
    assert fake.scopes == [(AZURE_SCOPE,)]  # six concurrent requests, one token fetch
    clock.advance(3)
    await client(gw, "t0").responses.create(model="m", input="x")
    assert len(fake.scopes) == 2
    seen = upstream.state.requests
    assert {r.headers["authorization"] for r in seen[:6]} == {"Bearer entra-token-1"}
    assert seen[6].headers["authorization"] == "Bearer entra-token-2"
    assert all("api-key" not in r.headers for r in seen)
    shapes = {(r.path, r.body["model"], r.query.get("api-version")) for r in seen}
    assert shapes == {("/openai/v1/responses", "m", None), ("/openai/v1/responses", "gpt-dep", None)}


async def test_credential_failure_is_a_502_without_crashing(upstream, make_gateway):
    class Flaky(FakeEntraCredential):
        def get_token(self, *scopes: str, **kwargs) -> AccessToken:
            if not self.scopes:
                self.scopes.append(scopes)
                raise RuntimeError("no az login")
            return super().get_token(*scopes, **kwargs)

    gw = await make_gateway(azure(Flaky(3600)))
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{gw.url}/t/z/v1/responses", json={"model": "m"}) as r:
            assert r.status == 502 and "RuntimeError" in (await r.json())["error"]["message"]
        async with s.post(f"{gw.url}/t/z/v1/responses", json={"model": "m"}) as r:
            assert r.status == 200
    assert [(r.outcome, r.counted) for r in gw.rows()] == [("failed", False), ("success", True)]
    assert len(upstream.state.requests) == 1


async def test_azure_static_key_goes_in_api_key_header(upstream, make_gateway):
    gw = await make_gateway(OpenAIProvider(StaticCredential("api-key", "azure-key-1"), "http", "azure"))
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{gw.url}/t/k/v1/responses?api-version=preview",
            json={"model": "m", "input": "x"},
            headers={"Api-Key": PLACEHOLDER, "Authorization": f"Bearer {PLACEHOLDER}"},
        ) as r,
    ):
        assert r.status == 200
    (seen,) = upstream.state.requests
    assert seen.headers["api-key"] == "azure-key-1" and "authorization" not in seen.headers
    assert "x-hcu-resource" not in seen.headers  # only the gateway pins resources
    assert seen.query == {"api-version": "preview"}


async def test_new_tasks_go_where_fewest_tasks_are_active_then_to_most_remaining_tokens(upstream, make_gateway):
    clock = ManualClock()
    hp, port = upstream.hostport, upstream.hostport.rpartition(":")[2]
    gw = await make_gateway(azure(FakeEntraCredential(3600), clock), clock=clock,
                            upstreams=f"{hp}@d1,{hp}@d2,localhost:{port}@d3")  # two resources: 2 + 1 deployments
    upstream.state.remaining_tokens.update({"d1": 5000, "d2": 4000, "d3": 1000})
    for task in ("a", "b", "c", "d", "e"):
        await client(gw, task).responses.create(model="m", input="x")
    # a: nothing known -> d1; b: the other resource has no task -> d3; c: resources even, d2 has none -> d2;
    # d: the resources carry 2 and 1 -> d3; e: resources even, d1 and d2 one each, d1 has more left -> d1
    assert [r.deployment for r in upstream.state.requests] == ["d1", "d3", "d2", "d3", "d1"]
    clock.advance(GATEWAY.placement_active_sec + 1)  # all idle; then only d (on d3) asks again
    await client(gw, "d").responses.create(model="m", input="x")
    await client(gw, "f").responses.create(model="m", input="x")
    assert [r.deployment for r in upstream.state.requests][-2:] == ["d3", "d1"]


async def test_429_moves_a_fresh_request_to_another_deployment_and_the_task_stays(upstream, make_gateway):
    hp = upstream.hostport
    gw = await make_gateway(azure(FakeEntraCredential(3600)), upstreams=f"{hp}@d1,{hp}@d2")
    upstream.replies.push(HttpFault(429, retry_after="30"), deployment="d1")
    c = client(gw, "m")
    await c.responses.create(model="m", input="x")
    await c.responses.create(model="m", input="x", previous_response_id="resp_1")
    assert [r.deployment for r in upstream.state.requests] == ["d1", "d2", "d2"]
    rows = gw.rows()
    assert [(r.deployment, r.attempts, r.rate_limit_wait_sec) for r in rows] == [
        ("d2", 2, 0.0),
        ("d2", 1, 0.0),
    ]
    # a new task avoids the cooling deployment
    await client(gw, "n").responses.create(model="m", input="x")
    assert upstream.state.requests[-1].deployment == "d2"


async def test_request_continuing_server_state_never_moves(upstream, make_gateway):
    hp = upstream.hostport
    gw = await make_gateway(azure(FakeEntraCredential(3600)), upstreams=f"{hp}@d1,{hp}@d2")
    await client(gw, "p").responses.create(model="m", input="x")
    upstream.replies.push(HttpFault(429, retry_after="0.3"), deployment="d1")
    await client(gw, "p").responses.create(model="m", input="x", previous_response_id="resp_prev")
    assert [r.deployment for r in upstream.state.requests] == ["d1", "d1", "d1"]
    assert gw.rows()[-1].rate_limit_wait_sec == 0.3


async def test_a_task_never_changes_resource(upstream, make_gateway):
    port = upstream.hostport.split(":")[1]
    gw = await make_gateway(azure(FakeEntraCredential(3600)), upstreams=f"127.0.0.1:{port}@d1,localhost:{port}@d2")
    upstream.replies.push(HttpFault(429, retry_after="0.2"), deployment="d1")
    await client(gw, "r").responses.create(model="m", input="x")
    assert [(r.headers["host"], r.deployment) for r in upstream.state.requests] == [
        (f"127.0.0.1:{port}", "d1"),
        (f"127.0.0.1:{port}", "d1"),
    ]


async def test_a_task_keeps_its_resource_across_a_restart(upstream, make_gateway):
    port = upstream.hostport.split(":")[1]
    spec = f"127.0.0.1:{port}@d1,localhost:{port}@d2"
    first = await make_gateway(azure(FakeEntraCredential(3600)), upstreams=spec)
    for task in ("a", "b"):  # b goes to localhost: d2 was never heard from
        await client(first, task).responses.create(model="m", input="x")
    second = await make_gateway(azure(FakeEntraCredential(3600)), upstreams=spec)
    await client(second, "b").responses.create(model="m", input="x")
    assert [(r.headers["host"].split(":")[0], r.deployment) for r in upstream.state.requests] == [
        ("127.0.0.1", "d1"),
        ("localhost", "d2"),
        ("localhost", "d2"),
    ]
    assert [(r.task, r.upstream, r.calls_used) for r in second.rows()][-1] == ("b", f"localhost:{port}", 2)


async def test_pinned_resources_round_robin_and_every_retry_carries_the_header(upstream, make_gateway):
    provider = OpenAIProvider(StaticCredential("Authorization", "Bearer relay-token"), "http", "openai")
    gw = await make_gateway(provider, pins=["resA.openai.azure.com", "resB.openai.azure.com"])
    upstream.replies.push(HttpFault(429, retry_after="0.1"), task="t1")
    for task in ("t1", "t2", "t3", "t1"):
        await openai.AsyncOpenAI(
            base_url=f"{gw.url}/t/{task}/v1",
            api_key=PLACEHOLDER,
            max_retries=0,
            default_headers={"x-task-id": task},
        ).responses.create(model="m", input="x")
    assert [(r.task, r.upstream) for r in gw.rows()][:3] == [
        ("t1", "resA.openai.azure.com"),
        ("t2", "resB.openai.azure.com"),
        ("t3", "resA.openai.azure.com"),
    ]
    assert [(r.task, r.headers["x-hcu-resource"]) for r in upstream.state.requests] == [
        ("t1", "resA.openai.azure.com"),
        ("t1", "resA.openai.azure.com"),
        ("t2", "resB.openai.azure.com"),
        ("t3", "resA.openai.azure.com"),
        ("t1", "resA.openai.azure.com"),
    ]


@pytest.mark.parametrize("spec", ["https://host", "host@", "host:99999", "a b", "host/path", "h,h", ""])
def test_bad_upstream_specs(spec):
    with pytest.raises(UpstreamSpecError, match="--upstreams"):
        parse_upstreams(spec)


def test_upstream_specs():
    assert [u.label for u in parse_upstreams("r1.openai.azure.com,r1.openai.azure.com@dep-1,127.0.0.1:8541")] == [
        "r1.openai.azure.com",
        "r1.openai.azure.com@dep-1",
        "127.0.0.1:8541",
    ]


def test_restored_pinned_task_keeps_its_pin_and_unknown_resources_are_ignored():
    pool = Pool(parse_upstreams("127.0.0.1:8541"), ["resA", "resB"])
    pool.restore("t", "resB", None)
    pool.restore("u", "gone.example", None)
    assert pool.place("t", False).pinned_resource == "resB"
    assert pool.place("u", False).pinned_resource == "resA"  # a new task: round robin from the start


async def test_azure_deployments_are_called_as_azure_documents_its_v1_api(upstream, make_gateway):
    """`host@deployment`: POST https://<host>/openai/v1/<api> with the deployment's name as the body's model;
    the token log keeps what the client asked for (model) and what served it (deployment)."""
    provider = OpenAIProvider(StaticCredential("api-key", "azure-key-1"), "http", "azure")
    gw = await make_gateway(provider, upstreams=f"{upstream.hostport}@gpt-54-dep")
    sdk = client(gw, "az")
    await sdk.responses.create(model="gpt-5.4", input="x")
    async with sdk.responses.stream(model="gpt-5.4", input="x") as stream:
        await stream.get_final_response()
    await sdk.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "x"}])
    packed = gzip.compress(orjson.dumps({"model": "gpt-5.4", "input": "compressed"}))
    async with aiohttp.ClientSession() as s, s.post(
        f"{gw.url}/t/az/v1/responses?api-version=preview", data=packed,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    ) as r:
        assert r.status == 200
    seen = upstream.state.requests
    assert [(r.path, r.body["model"], r.query) for r in seen] == [
        ("/openai/v1/responses", "gpt-54-dep", {}),
        ("/openai/v1/responses", "gpt-54-dep", {}),
        ("/openai/v1/chat/completions", "gpt-54-dep", {}),
        ("/openai/v1/responses", "gpt-54-dep", {"api-version": "preview"}),
    ]
    assert seen[1].body["stream"] is True and seen[3].body["input"] == "compressed"
    assert "content-encoding" not in seen[3].headers, "a rewritten body is sent as plain JSON"
    assert all(r.headers["api-key"] == "azure-key-1" for r in seen)
    assert {(r.model, r.deployment, r.outcome) for r in gw.rows()} == {("gpt-5.4", "gpt-54-dep", "success")}
