"""The gateway during the agent phase: a restart on the same token log does not end
the task, and a rate-limit wait still in progress extends the timeout."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.demo.stand_in import free_port, scripted_stack
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.guest.bridge import bridge_address
from hcu.record_io import read_record
from tests.failures.conftest import StartFn, write_policies
from tests.run_task.conftest import RENAME_MATCH, RENAME_STEPS, RENAME_TASK, policy

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld]

# Run in the guest by the agent's first tool call: returns once the gateway has gone away and come back.
AWAIT_RESTART = """python3 - <<'PY'
import time, urllib.request
def up():
    try:
        urllib.request.urlopen("{gateway}/healthz", timeout=2).read()
        return True
    except Exception:
        return False
while up():
    time.sleep(0.2)
while not up():
    time.sleep(0.2)
print("GATEWAY CAME BACK")
PY"""


def counted_rows(token_log: Path, scope: str) -> list[dict]:
    rows = [orjson.loads(line) for line in token_log.read_bytes().splitlines() if line.strip()]
    return [row for row in rows if row["task"] == scope and row["counted"]]


def test_a_gateway_restart_mid_agent_phase_does_not_end_the_task(start_task: StartFn, tmp_path: Path) -> None:
    """the gateway is stopped while the agent's first tool runs, the runner sees it away (and tolerates
    it), then it starts again on the same port and token log; the task completes and its usage is complete."""
    host = bridge_address()
    port = free_port(host)
    wait = {"tool": "run_shell", "arguments": {"command": AWAIT_RESTART.format(gateway=f"http://{host}:{port}"),
                                               "timeout_sec": 300}}
    steps = [wait, *RENAME_STEPS]
    policies = write_policies(tmp_path, {"restart": policy(RENAME_MATCH, steps)})
    with scripted_stack("codex", policies, token_log=tmp_path / "tokens.jsonl", max_model_calls=20,
                        log_dir=tmp_path / "logs", gateway_port=port) as stack:
        task = start_task(RENAME_TASK, gateway=stack.gateway_url, token_log=stack.token_log,
                          extra_args=["--code-mode"])
        task.wait_until(lambda: stack.token_log.exists() and b'"counted":true' in stack.token_log.read_bytes(),
                        "the first model call")
        stack.restart_gateway(lambda: task.wait_until(lambda: "tolerated for" in task.log(),
                                                      "the runner seeing the gateway away"))
        result, code = task.finish()
    assert (result.status, result.score, result.failure_classification) == ("completed", 1.0, None), \
        task.log()[-3000:]
    assert code == 0
    scope = read_record(task.result_dir / "meta.json", AttemptMeta).scope
    counted = counted_rows(stack.token_log, scope)
    assert [row["calls_used"] for row in counted] == list(range(1, len(steps) + 2)), "counters restored"
    assert result.usage.model_calls == len(steps) + 1 and result.usage.fully_accounted
    assert "GATEWAY CAME BACK" in "".join(p.read_text() for p in task.result_dir.glob("phase-agent-turn-*"))


def test_a_rate_limit_wait_in_progress_extends_the_timeout(start_task: StartFn, tmp_path: Path) -> None:
    """the first generation is rate-limited with a 50 s retry-after, longer than the 40 s timeout. The
    wait still running when the timeout passes counts toward it (the reference: waiting never truncates a
    task), so the agent finishes the task; counting only finished waits would stop it mid-wait."""
    throttled = policy(RENAME_MATCH, RENAME_STEPS,
                       faults=[{"kind": "http", "status": 429, "retry_after": "50", "at_step": 0, "times": 1}])
    with scripted_stack("codex", write_policies(tmp_path, {"throttled": throttled}),
                        token_log=tmp_path / "tokens.jsonl", max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        task = start_task(RENAME_TASK, gateway=stack.gateway_url, token_log=stack.token_log,
                          extra_args=["--timeout-seconds", "40"])
        result, _ = task.finish()
    assert (result.status, result.termination_reason, result.score) == ("completed", "completed", 1.0), \
        task.log()[-3000:]
    assert result.usage.rate_limit_wait_sec > 0, "the gateway waited out the rate limit"


def test_whether_a_turn_ended_on_a_rate_limit_is_the_gateways_verdict(start_task: StartFn, tmp_path: Path) -> None:
    """Items 8 and 9: the upstream fails with a server error whose text speaks of a rate limit. The gateway
    logs failed generations (a 500 is no rate limit), though the CLI's last words say "rate limit". The turn
    is judged from the gateway's rows: an upstream error, ended at once, the session not resumed (no message
    injected)."""
    wording = {"error": {"message": "Rate limit exceeded, please retry later", "type": "server_error",
                         "code": "server_error"}}
    failing = policy(RENAME_MATCH, RENAME_STEPS, faults=[{"kind": "http", "status": 500, "body": wording}])
    with scripted_stack("claude-code", write_policies(tmp_path, {"failing": failing}),
                        token_log=tmp_path / "tokens.jsonl", max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        task = start_task(RENAME_TASK, gateway=stack.gateway_url, token_log=stack.token_log, agent="claude-code",
                          extra_args=["--rate-limit-resume-delay", "1"])
        result, code = task.finish()
    assert (result.status, result.failure_classification, result.rate_limit_resumes, code) == (
        "error", "upstream_error", 0, 1), task.log()[-3000:]
    events = (task.result_dir / "phase-agent-turn-1-events.jsonl").read_text()
    assert "Rate limit exceeded" in events, "the CLI's own words speak of a rate limit"
    assert not (task.result_dir / "phase-agent-turn-2-events.jsonl").exists(), "the session was not resumed"
