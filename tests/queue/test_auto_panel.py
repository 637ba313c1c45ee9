"""A short real panel under `"max_active_tasks": "auto"`: the demo's `os` tasks on the test desktop, the real Codex
CLI, the real gateway and the scripted policy behind it, the policy holding a tight requests-per-minute quota (as
Azure enforces one, hcu/scripted/rate_limits.py). The admission runs with its holds shortened to the panel's
minutes. Every attempt ends scored, none on a rate limit: the gateway waits out the 429s, and the queue admits by
the waits it reports."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.defaults import AdmissionDefaults
from hcu.demo.__main__ import DEFAULT_POLICIES
from hcu.demo.stand_in import free_port, scripted_stack
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.queue import admission
from hcu.osworld.queue.gate import launch_gate
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.run_config import load_config
from tests.demo_panel import demo_config
from tests.queue.ray_checks import results
from tests.queue.test_auto_admission import launches_within_the_limit

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld]

OS_TASKS = [{"id": "e0df059f-28a6-4169-924f-b9623e7184cc", "task_domain": "os"},
            {"id": "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa", "task_domain": "os"},
            {"id": "a4d98375-215b-4a4d-aee9-3d4370fccc41", "task_domain": "os"}]
RULE = AdmissionDefaults(window_sec=60.0, lower_hold_sec=20.0, raise_hold_sec=60.0, sample_sec=2.0)
"""The shipped rule with holds fit for attempts of a minute or two."""
QUOTA = {"deployments": {"*": {"rpm": 6}}, "time_factor": 2}
"""Six requests in any 30 s: less than one Codex attempt asks for."""


@pytest.mark.timeout(1800)
def test_an_auto_panel_against_a_rate_limited_model_scores_every_attempt(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "ADMISSION", RULE)
    bridge = bridge_address()
    port = free_port(bridge)
    config = load_config(demo_config(tmp_path, "auto-panel", tasks=OS_TASKS, max_active_tasks="auto",
                                     auto_max_active_tasks=3, gateway=f"http://{bridge}:{port}"))
    limits = tmp_path / "rate-limits.json"
    limits.write_bytes(orjson.dumps(QUOTA))
    with scripted_stack(config.agent, DEFAULT_POLICIES, token_log=config.token_log,
                        max_model_calls=config.max_model_calls, log_dir=config.run_dir / "stand-in",
                        gateway_port=port, scope_key_file=config.scope_key_file, rate_limits=limits):
        states = run_queue(config, gate=launch_gate(config))
    assert states == {task["id"]: "finished" for task in OS_TASKS}
    scored = results(config.run_dir)
    assert len(scored) == 3 and all(r["status"] == "completed" and r["score"] is not None for r in scored), scored
    assert not (config.run_dir / "retries").exists(), "an attempt was set aside (a rate limit the gateway gave up on)"
    rows = [orjson.loads(line) for line in config.token_log.read_bytes().splitlines()]
    assert any(row["rate_limit_wait_sec"] > 0 for row in rows), "the quota never bound: no rate-limit wait"
    assert not any(row["outcome"] == "rate_limited" for row in rows), "a 429 reached an agent"
    events = [orjson.loads(line) for line in (config.run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    limit_events = [e for e in events if e["event"] == "limit"]
    assert limit_events[0]["signal"] == "default" and all(1 <= e["limit"] <= 3 for e in limit_events)
    launches_within_the_limit(events)
    assert "at once (auto, ceiling" in (config.run_dir / "QUEUE_STATUS.md").read_text()
