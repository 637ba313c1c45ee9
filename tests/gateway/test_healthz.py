"""`/healthz` at two levels: that the gateway is up, for anyone; its details (budget, token log, scope key id,
upstreams, task count) for this host, or for the holder of a scope (its secret, with per-task secrets on)."""

from __future__ import annotations

import aiohttp

from hcu.gateway.scope_secret import key_id, load_or_create_key, scope_secret

DETAILS = {"provider", "max_requests_per_task", "rate_limit_max_wait", "upstreams", "tasks", "scope_secrets",
           "scope_key_id", "token_log"}


async def healthz(url: str, task: str | None = None, secret: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with aiohttp.ClientSession() as s, s.get(f"{url}/healthz", params={"task": task} if task else None,
                                                   headers=headers) as r:
        return r.status, await r.json()


async def test_this_host_and_a_scope_holder_see_the_details(upstream, make_gateway, tmp_path):
    key_file = tmp_path / "scope.key"
    gw = await make_gateway("openai", budget=3, scope_key_file=key_file)
    key = load_or_create_key(key_file)
    status, loopback = await healthz(gw.url)
    assert status == 200 and set(loopback) >= DETAILS and loopback["scope_key_id"] == key_id(key)
    status, scoped = await healthz(gw.url, "t.a1", scope_secret(key, "t.a1"))
    assert status == 200 and set(scoped) >= DETAILS and scoped["task"]["task"] == "t.a1"
    for task, secret in (("t.a1", scope_secret(key, "t.a2")), ("t.a1", None), ("t.a1", "hcu1-" + "0" * 64)):
        status, refused = await healthz(gw.url, task, secret)
        assert status == 403 and set(refused) == {"error"}, "a scope's view needs its secret, from here too"
    status, bad = await healthz(gw.url, "../x")
    assert status == 400 and set(bad) == {"error"}


async def test_without_secrets_any_scope_sees_the_details(upstream, make_gateway):
    gw = await make_gateway("anthropic", budget=2)
    status, scoped = await healthz(gw.url, "any.a1", "placeholder")
    assert status == 200 and set(scoped) >= DETAILS and scoped["max_requests_per_task"] == 2
