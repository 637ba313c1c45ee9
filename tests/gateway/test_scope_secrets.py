"""Per-task secrets: with a key file, a scope is served only to the holder of its secret;
guests cannot mint budgets, read or end another task; without one, any placeholder works as before."""

from __future__ import annotations

import asyncio
import logging
import os
import stat

import aiohttp
import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from hcu.gateway.scope_secret import ScopeKeyError, key_id, load_or_create_key, scope_secret
from hcu.osworld.agents.base import PLACEHOLDER_TOKEN
from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.attempt.scope_credential import check_scope_key, gateway_credential
from hcu.osworld.errors import GatewayError
from hcu.scripted.replies import HttpFault

from .conftest import PLACEHOLDER


@pytest.fixture
def key_file(tmp_path):
    return tmp_path / "keys" / "scope.key"


def test_the_key_file_is_created_private_once_and_checked(key_file):
    key = load_or_create_key(key_file)
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert load_or_create_key(key_file) == key  # the second reader gets the same key
    assert scope_secret(key, "t.a1") != scope_secret(key, "t.a2") != scope_secret(key, "u.a1")
    assert key.hex() not in key_id(key) and len(key_id(key)) == 16
    key_file.write_text("not a key\n")
    with pytest.raises(ScopeKeyError, match="64 hex characters") as err:
        load_or_create_key(key_file)
    assert "not a key" not in str(err.value)


async def test_a_scope_is_served_only_with_its_secret(upstream, make_gateway, key_file, caplog):
    caplog.set_level(logging.INFO)
    gw = await make_gateway("openai", budget=2, scope_key_file=key_file)
    key = load_or_create_key(key_file)
    mine, other = scope_secret(key, "task-1.a1"), scope_secret(key, "task-2.a1")

    def client(scope: str, credential: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{gw.url}/t/{scope}/v1", api_key=credential, max_retries=0)

    assert (await client("task-1.a1", mine).responses.create(model="m", input="x")).output_text == "ok"
    for scope, credential in [("task-1.a1", PLACEHOLDER), ("task-1.a1", other), ("task-1.a99", mine),
                              ("task-2.a1", mine), ("task-1.a1", mine[:-1])]:
        with pytest.raises(openai.PermissionDeniedError, match="does not hold task scope"):
            await client(scope, credential).responses.create(model="m", input="x")
    assert len(upstream.state.requests) == 1, "no refused request reached the upstream"
    assert [r.task for r in gw.rows()] == ["task-1.a1"], "refused requests leave no row"
    assert set(gw.state.budget.tasks) == {"task-1.a1"}, "and no task state"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{gw.url}/healthz", params={"task": "task-1.a1"}) as r:
            assert r.status == 403
        async with s.get(f"{gw.url}/healthz", params={"task": "task-1.a1"},
                         headers={"Authorization": f"Bearer {other}"}) as r:
            assert r.status == 403
        async with s.get(f"{gw.url}/healthz") as r:
            health = await r.json()
    assert (health["scope_secrets"], health["scope_key_id"]) == (True, key_id(key))
    assert (await gw.task_view("task-1.a1", mine))["calls_used"] == 1
    for blob in (gw.log_path.read_text(), caplog.text):
        assert mine not in blob and other not in blob and key.hex() not in blob


async def test_another_task_cannot_be_failed_by_bad_requests(upstream, make_gateway, key_file):
    gw = await make_gateway("openai", scope_key_file=key_file)
    secret = scope_secret(load_or_create_key(key_file), "victim.a1")
    upstream.replies.push(*[HttpFault(500)] * 5)
    attacker = openai.AsyncOpenAI(base_url=f"{gw.url}/t/victim.a1/v1", api_key=PLACEHOLDER, max_retries=0)
    for _ in range(5):
        with pytest.raises(openai.PermissionDeniedError):
            await attacker.responses.create(model="m", input="x")
    view = await gw.task_view("victim.a1", secret)
    assert (view["failed_in_a_row"], view["failed"]) == (0, False)
    assert upstream.state.requests == []


async def test_each_sdk_carries_the_secret_where_its_cli_does(upstream, make_gateway, key_file, tmp_path):
    key = load_or_create_key(key_file)
    claude = await make_gateway("anthropic", scope_key_file=key_file, log_name="a.jsonl")
    gemini = await make_gateway("gemini", scope_key_file=key_file, log_name="g.jsonl")
    secret = scope_secret(key, "s.a1")
    messages = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    for kwargs in ({"api_key": secret}, {"auth_token": secret}):  # x-api-key, or Bearer (ANTHROPIC_AUTH_TOKEN)
        sdk = anthropic.AsyncAnthropic(base_url=f"{claude.url}/t/s.a1", max_retries=0, **kwargs)
        assert (await sdk.messages.create(**messages)).content[0].text == "ok"
    with pytest.raises(anthropic.PermissionDeniedError):
        await anthropic.AsyncAnthropic(base_url=f"{claude.url}/t/s.a1", api_key=PLACEHOLDER,
                                       max_retries=0).messages.create(**messages)
    sdk = genai.Client(api_key=secret, http_options=types.HttpOptions(base_url=f"{gemini.url}/t/s.a1"))
    assert (await sdk.aio.models.generate_content(model="g", contents="x")).text == "ok"
    wrong = genai.Client(api_key=PLACEHOLDER, http_options=types.HttpOptions(base_url=f"{gemini.url}/t/s.a1"))
    with pytest.raises(genai_errors.ClientError) as err:
        await wrong.aio.models.generate_content(model="g", contents="x")
    assert err.value.code == 403
    assert all(secret not in r.headers.values() for r in upstream.state.requests), "the secret stays here"


async def test_without_a_key_file_any_placeholder_is_accepted(upstream, make_gateway):
    gw = await make_gateway("openai")
    for credential in (PLACEHOLDER, "anything", "hcu1-" + "0" * 64):
        sdk = openai.AsyncOpenAI(base_url=f"{gw.url}/t/open.a1/v1", api_key=credential, max_retries=0)
        assert (await sdk.responses.create(model="m", input="x")).output_text == "ok"
    assert (await gw.task_view("open.a1"))["calls_used"] == 3
    assert (await gw.health())["scope_secrets"] is False


async def test_the_runner_issues_the_secret_the_gateway_expects(upstream, make_gateway, key_file):
    """The runner's half: the credential it renders for an attempt is the one the gateway serves, it checks the
    gateway's key before any model call, reads the scope's state with it, and keeps it out of evidence."""
    gw = await make_gateway("openai", scope_key_file=key_file)
    credential = gateway_credential(key_file, "task-9.a2")
    sdk = openai.AsyncOpenAI(base_url=f"{gw.url}/t/task-9.a2/v1", api_key=credential.token, max_retries=0)
    assert (await sdk.responses.create(model="m", input="x")).output_text == "ok"
    health = await gw.health()
    assert check_scope_key(health, credential, gw.url) is None
    view = await asyncio.to_thread(gateway_health, gw.url, task="task-9.a2", secret=credential.secret)
    assert view.task.calls_used == 1
    with pytest.raises(GatewayError, match="another scope key"):
        check_scope_key(health, gateway_credential(key_file.with_name("other.key"), "task-9.a2"), gw.url)
    with pytest.raises(GatewayError, match="--scope-key-file"):
        check_scope_key(health, gateway_credential(None, "task-9.a2"), gw.url)
    assert "not protected" in check_scope_key({"scope_secrets": False}, credential, gw.url)
    shown = credential.redact(f"env: HCU_GATEWAY_TOKEN={credential.token}\n".encode())
    assert shown == b"env: HCU_GATEWAY_TOKEN=[scope secret]\n"
    assert credential.token not in repr(credential)
    assert gateway_credential(None, "task-9.a2").token == PLACEHOLDER_TOKEN
