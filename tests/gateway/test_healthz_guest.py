"""`/healthz` as a guest on the Docker bridge sees it: that the gateway is up, and the details only for its own
scope with its own secret; the runner's probe asks exactly so, from inside the guest."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from hcu.osworld.agents.base import PLACEHOLDER_TOKEN
from hcu.osworld.attempt.probe import check_gateway_from_guest
from hcu.osworld.attempt.scope_credential import check_scope_key, gateway_credential
from hcu.osworld.errors import GatewayError
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.records.identity import AttemptId
from tests.session import TEST_DESKTOP_IMAGE, unique_run_id

from .test_healthz import DETAILS, healthz

pytestmark = pytest.mark.docker

BARE_HEALTHZ = ("import sys, urllib.request\n"
                "print(urllib.request.urlopen(sys.argv[1] + '/healthz', timeout=10).read().decode())\n")


async def test_a_guest_learns_the_details_only_with_its_scope_and_secret(upstream, make_gateway, tmp_path):
    key_file = tmp_path / "scope.key"
    gw = await make_gateway("openai", budget=3, scope_key_file=key_file, host=bridge_address())
    attempt = AttemptId(run_id=unique_run_id("healthz"), task_id="probe", attempt=1)
    scope, credential = attempt.gateway_scope, gateway_credential(key_file, attempt.gateway_scope)
    spec = GuestSpec(kind="test-desktop", image=TEST_DESKTOP_IMAGE)
    guest = await asyncio.to_thread(start_guest, spec, attempt, work_dir=tmp_path / "guest", boot_timeout_sec=120)
    try:
        api = guest.api
        bare = await asyncio.to_thread(api.execute, ["python3", "-c", BARE_HEALTHZ, gw.url], timeout_sec=30)
        assert orjson.loads(bare.output) == {"status": "up"}, bare
        health = await asyncio.to_thread(check_gateway_from_guest, api, gw.url, 3, scope=scope,
                                         token=credential.token)
        assert set(health) >= DETAILS and health["task"]["task"] == scope
        assert check_scope_key(health, credential, gw.url) is None
        with pytest.raises(GatewayError, match="max_requests_per_task=3, this run max_model_calls=5"):
            await asyncio.to_thread(check_gateway_from_guest, api, gw.url, 5, scope=scope, token=credential.token)
        with pytest.raises(GatewayError, match="refused this attempt's scope.*--scope-key-file"):
            await asyncio.to_thread(check_gateway_from_guest, api, gw.url, 3, scope=scope, token=PLACEHOLDER_TOKEN)
    finally:
        await asyncio.to_thread(remove_guest, guest)
        await asyncio.to_thread(cleanup, run_id=attempt.run_id)
    status, own = await healthz(gw.url)  # this host, calling its own bridge address
    assert status == 200 and set(own) >= DETAILS
    assert credential.secret not in gw.log_path.read_text()
