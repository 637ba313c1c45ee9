"""`"max_active_tasks": "auto"` on the local multi-node Ray cluster: each node's agent reads its own gateway's
per-scope rate-limit waits and upstream limit headers, the head merges the nodes' reports and applies the rule a
local run applies. The node gateways forward to the scripted upstream holding a tight requests-per-minute quota
(time compressed), so the stand-in runners' model calls wait on rate limits at their node's gateway."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from hcu.defaults import AdmissionDefaults
from hcu.demo.stand_in import free_port
from hcu.osworld.queue import admission
from tests.queue.ray_cluster import UPSTREAM_TOKEN_ENV
from tests.queue.test_auto_admission import launches_within_the_limit

pytestmark = [pytest.mark.docker, pytest.mark.ray]

RULE = AdmissionDefaults(start=4, window_sec=30.0, lower_hold_sec=3.0, raise_hold_sec=3600.0, sample_sec=0.5)
"""The shipped rule with holds in seconds, for attempts that last seconds."""


def rate_limited_upstream(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The scripted upstream allowing 6 requests in any 10 s (6 per minute, time compressed 6 times)."""
    limits = tmp_path / "rate-limits.json"
    limits.write_bytes(orjson.dumps({"deployments": {"*": {"rpm": 6}}, "time_factor": 6}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hcu.scripted.upstream", "--port", str(port),
                             "--rate-limits", str(limits)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while proc.poll() is None and time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the scripted upstream did not start")


def test_the_head_applies_the_rule_to_the_node_gateways_reports(ray_panel, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "ADMISSION", RULE)
    upstream, port = rate_limited_upstream(tmp_path)
    try:
        gateway = {"upstream_args": ["--upstreams", f"127.0.0.1:{port}", "--upstream-kind", "openai",
                                     "--upstream-scheme", "http"], "upstream_token_env": UPSTREAM_TOKEN_ENV}
        tasks = [f"q{i}" for i in range(6)]
        panel = ray_panel(tasks, ray={"node_gateway": gateway}, gateway=None, max_active_tasks="auto",
                          auto_max_active_tasks=5, sleep_sec=(0.2, 0.4),
                          scenario={"generations": dict.fromkeys(tasks, 5)})
        assert panel.run() == dict.fromkeys(tasks, "finished")
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    found = panel.queue_events()
    limits = [e for e in found if e["event"] == "limit"]
    assert (limits[0]["limit"], limits[0]["signal"]) == (4, "default")
    lowered = [e for e in limits if e["signal"] == "waits"]
    assert lowered, f"the nodes' waits never reached the head: {limits}"
    assert lowered[0]["previous"] == 4 and lowered[0]["limit"] == 2 and lowered[0]["wait_share"] > RULE.lower_above
    assert lowered[0]["headroom"] is not None, "the upstream's limit headers, as a node gateway saw them"
    launches_within_the_limit(found)
    nodes = {e["node"] for e in found if e["event"] == "exit"}
    assert nodes == {"node-a", "node-b"}, "both nodes' gateways served attempts"
