"""Real tier: each real CLI runs in the test desktop as `user`, with its rendered plan, against hcu's gateway
in front of the scripted policy. The policy opens the terminal with ctrl+alt+t and types a command through
computer-use. Its upstream answers 429 at the typing step until the session is resumed: the first turn ends
on a rate limit (the gateway gives up after its waits), the resume command continues the same session, the
guest changes, and parse_events reads each turn's end and the protocol word."""

from __future__ import annotations

import json
import uuid

import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import STAND_IN_TOKEN, scripted_stack
from hcu.gateway.scope_secret import load_or_create_key, scope_secret
from hcu.osworld.agents import get_adapter
from hcu.osworld.agents.base import RESUME_PROMPT, AgentContext
from tests.agents.conftest import ARTIFACTS, require_artifact
from tests.agents.live import desktop_container, prepare

TASK = "Write the proof file for the live agent test."
# Side calls that reach the gateway besides the policy's steps (Grok's session title).
EXTRA_CALLS = {"codex": 0, "claude-code": 0, "gemini-cli": 0, "grok-build": 1}
# Tool calls reported in each turn's stream (Grok 0.2.111 reports none).
REPORTED_TOOL_CALLS = {"codex": (2, 2), "claude-code": (2, 2), "gemini-cli": (2, 2), "grok-build": (0, 0)}


def policy_file(tmp_path, marker: str):
    steps = [
        {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}},
        {"tool": "wait", "arguments": {"seconds": 2}},
        {"tool": "type", "arguments": {"text": f"echo {marker} > ~/proof.txt\n"}},
        {"tool": "wait", "arguments": {"seconds": 1}},
    ]
    path = tmp_path / "policies.json"
    throttled = {"kind": "http", "status": 429, "at_step": 2, "until_text": RESUME_PROMPT}
    path.write_text(json.dumps({"policies": {"proof": {
        "match": TASK, "steps": steps, "final_message": "The proof file is written.\nTASK_COMPLETE",
        "faults": [throttled]}}}))
    return path, len(steps)


def run_turn(guest, argv, plan, adapter, events_file):
    rc, events, stderr = guest.run(argv, env=plan.env, timeout=240)
    events_file.write_text(events)
    return adapter.parse_events(events), f"rc={rc}\nstderr: {stderr[-1500:]}\nevents: {events[-1500:]}"


@pytest.mark.artifacts
@pytest.mark.docker
@pytest.mark.timeout(420)
@pytest.mark.parametrize("agent", ["codex", "claude-code", "gemini-cli", "grok-build"])
def test_real_cli_solves_through_computer_use(agent, tmp_path):
    adapter = get_adapter(agent)
    defaults = adapter.cli
    for artifact in defaults.artifacts:
        require_artifact(artifact.name)
    computer_use = require_artifact("computer-use")
    marker = f"hcu-{agent}-{uuid.uuid4().hex[:8]}"
    policies, steps = policy_file(tmp_path, marker)
    scope = f"live-{agent}.a1"
    token_log, key_file = tmp_path / "gateway-tokens.jsonl", tmp_path / "gateway-scope.key"
    with scripted_stack(agent, policies, token_log=token_log, max_model_calls=20, log_dir=tmp_path,
                        rate_limit_max_wait=5, scope_key_file=key_file) as stack, \
            desktop_container("test-agents", f"live-{agent}") as guest:
        ctx = AgentContext(
            scope=scope, gateway_url=stack.gateway_url, model=defaults.model, effort=defaults.effort,
            channels=["gui", "a11y", "keyboard"],
            base_instructions=(REPO_ROOT / "instructions" / "base.md").read_text(),
            profile_instructions=(REPO_ROOT / "instructions" / "hybrid.md").read_text(),
            prompt=f"{TASK}\nEnd with TASK_COMPLETE, TASK_INFEASIBLE or ASK_USER.",
            session_id=str(uuid.uuid4()), gateway_token=scope_secret(load_or_create_key(key_file), scope))
        plan = adapter.plan(ctx, ARTIFACTS)
        assert prepare(guest, plan, ctx, computer_use)
        first, context = run_turn(guest, plan.run_argv, plan, adapter, tmp_path / "turn-1.jsonl")
        assert not first.succeeded and not first.refused_budget, context
        throttled = [r for r in map(json.loads, token_log.read_text().splitlines()) if r["task"] == scope]
        assert throttled[-1]["outcome"] == "rate_limited", context  # the gateway's verdict on the turn
        assert first.protocol_word is None and first.tool_calls == REPORTED_TOOL_CALLS[agent][0], context
        outcome, context = run_turn(guest, plan.resume_argv, plan, adapter, tmp_path / "turn-2.jsonl")
        assert outcome.succeeded, context
        assert outcome.protocol_word == "TASK_COMPLETE" and outcome.error is None, context
        assert outcome.tool_calls == REPORTED_TOOL_CALLS[agent][1], context
        _, proof, _ = guest.run(["cat", "/home/user/proof.txt"])
        assert proof.strip() == marker, f"the typed command did not run in the guest terminal\n{context}"
        leak_check = (f"grep -rl {STAND_IN_TOKEN} /home/user /tmp 2>/dev/null; "
                      f"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {STAND_IN_TOKEN}")
        _, found, _ = guest.run(["sh", "-c", leak_check])
        assert found.strip() == "0", f"the upstream credential reached the guest: {found}"
    rows = [json.loads(line) for line in token_log.read_text().splitlines()]
    # the gateway serves the scope only to its secret, which the CLI sent where it sends its API key
    counted = [r for r in rows if r["task"] == scope and r["counted"]]
    assert len(counted) == steps + 1 + EXTRA_CALLS[agent], rows
