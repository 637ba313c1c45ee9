"""How attempts end when the model misbehaves: budget, persistent throttling, hangs, and what the guest holds."""

from __future__ import annotations

import docker
import pytest

from hcu.demo.stand_in import STAND_IN_TOKEN
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.errors import policy_for
from hcu.osworld.evidence.atif import SCHEMA_VERSION, Trajectory
from hcu.osworld.evidence.collect import TrajectoryReport
from hcu.record_io import read_record
from tests.run_task.conftest import LOOK_STEPS, RENAME_MATCH, RENAME_STEPS, RENAME_TASK, RunFn, policy

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]


def test_budget_ends_the_task_after_exactly_n_counted_calls(run_task: RunFn) -> None:
    never = policy(RENAME_MATCH, LOOK_STEPS, never_finish=True)
    run = run_task("codex", RENAME_TASK, {"loop": never}, max_model_calls=3)
    r = run.result
    assert (r.status, r.termination_reason, r.score) == ("completed", "max_model_calls", 0.0), run.log[-2000:]
    rows = run.token_rows()
    assert sum(row["counted"] for row in rows) == 3 == r.usage.model_calls
    assert any(row["outcome"] == "refused_budget" for row in rows)


def test_persistent_throttling_is_resumed_then_classified_upstream_rate_limit(run_task: RunFn) -> None:
    throttled = policy(RENAME_MATCH, RENAME_STEPS, faults=[{"kind": "http", "status": 429, "retry_after": "1"}])
    run = run_task("claude-code", RENAME_TASK, {"throttled": throttled}, rate_limit_max_wait=2,
                   extra_args=["--rate-limit-resume-delay", "1"])
    r = run.result
    assert r.status == "error" and r.failure_classification == "upstream_rate_limit", run.log[-2000:]
    assert r.score is None, "a throttled attempt is never scored"
    assert r.rate_limit_resumes == 2
    assert sorted(run.result_dir.glob("phase-agent-turn-*-events.jsonl"))[-1].name.startswith(
        "phase-agent-turn-3"), "the session was resumed twice"
    assert any(row["outcome"] == "rate_limited" for row in run.token_rows())


def test_a_hanging_model_ends_at_the_no_progress_limit(run_task: RunFn) -> None:
    hangs = policy(RENAME_MATCH, RENAME_STEPS, faults=[{"kind": "hang", "at_step": 1}])
    run = run_task("codex", RENAME_TASK, {"hangs": hangs}, extra_args=["--no-progress-seconds", "25"])
    r = run.result
    assert (r.status, r.termination_reason, r.score) == ("completed", "timeout", 0.0), run.log[-2000:]
    assert r.termination_detail == "no_progress", "the no-progress stop is recorded as such"
    agent = read_record(run.result_dir / "meta.json", AttemptMeta).agent
    assert agent.failure_message == "agent stopped by the no progress limit", agent


@pytest.fixture
def planted_image() -> str:
    """The test desktop with inherited agent configuration planted in the user's home."""
    client = docker.from_env()
    tag = "hcu-test-desktop:planted"
    box = client.containers.run("hcu-test-desktop:latest", ["sleep", "infinity"], detach=True, user="user",
                                entrypoint=[], labels={"hcu.managed": "1", "hcu.run_id": "e2e-planted"})
    try:
        box.exec_run(["sh", "-c", "mkdir -p ~/.codex && echo PLANTED-AGENTS > ~/.codex/AGENTS.md && "
                      "echo '{\"planted\": \"PLANTED-CLAUDE\"}' > ~/.claude.json"], user="user")
        base = client.images.get("hcu-test-desktop:latest").attrs["Config"]
        # The planting container ran as `user` without the entrypoint; the image keeps the desktop's own start.
        box.commit(repository="hcu-test-desktop", tag="planted",
                   conf={"Entrypoint": base.get("Entrypoint"), "Cmd": base["Cmd"], "User": base["User"] or "root"})
    finally:
        box.remove(force=True, v=True)
    yield tag
    client.images.remove(tag, force=True)


def test_isolation_and_no_credential_in_the_guest(run_task: RunFn, planted_image: str) -> None:
    head, tail = STAND_IN_TOKEN[:8], STAND_IN_TOKEN[8:]  # the command itself must not spell the secret
    look = (f"ls -a ~ ~/.codex 2>&1; cat ~/.claude.json 2>&1; env; ps auxeww; H={head}; "
            f'grep -rl "$H{tail}" ~ /tmp 2>/dev/null; echo LOOKED')
    steps = [{"tool": "run_shell", "arguments": {"command": look}}]
    run = run_task("claude-code", RENAME_TASK, {"look": policy(RENAME_MATCH, steps)}, image=planted_image,
                   extra_args=["--code-mode"])
    assert run.result.status == "completed", run.log[-2000:]
    trace = run.trace_text()
    assert "LOOKED" in trace, "the shell look ran inside the guest"
    assert "PLANTED-AGENTS" not in trace and "PLANTED-CLAUDE" not in trace
    assert STAND_IN_TOKEN not in trace, "no upstream credential in the guest's files, environment or processes"
    assert "ANTHROPIC_AUTH_TOKEN=[scope secret]" in trace, "the guest holds its scope secret, kept out of results"
    secret = run.scope_secret()
    for path in run.result_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert STAND_IN_TOKEN.encode() not in data and secret.encode() not in data, path
    assert STAND_IN_TOKEN not in run.token_log.read_text() and secret not in run.token_log.read_text()
    assert run.result.usage.model_calls >= 1, "the gateway served the scope to the holder of its secret"


def test_upstream_failures_end_the_attempt_as_an_upstream_error_without_a_resume_message(run_task: RunFn) -> None:
    """a CLI that exits after upstream failures ends the attempt as an upstream error
    (retried by the queue, never scored); no "continue" message is injected into its conversation."""
    broken = policy(RENAME_MATCH, RENAME_STEPS, faults=[{"kind": "http", "status": 500}])
    run = run_task("codex", RENAME_TASK, {"broken": broken})
    r = run.result
    assert (r.status, r.failure_classification, r.score) == ("error", "upstream_error", None), run.log[-2000:]
    assert policy_for(r.failure_classification).retry
    failed = [row for row in run.token_rows() if row["outcome"] == "failed"]
    assert failed and not any(row["counted"] for row in run.token_rows())
    assert [p.name for p in sorted(run.result_dir.glob("phase-agent-turn-*-events.jsonl"))] == [
        "phase-agent-turn-1-events.jsonl"], "the session was not resumed"
    assert [p.name for p in r.phases if p.status == "skipped"] == ["settle", "save desktop", "evaluate"]


def test_a_gateway_with_another_budget_stops_the_attempt_before_any_model_call(run_task: RunFn) -> None:
    run = run_task("gemini-cli", RENAME_TASK, {"rename": policy(RENAME_MATCH, RENAME_STEPS)},
                   gateway_budget=7)
    r = run.result
    assert (r.status, r.failure_classification, r.score) == ("error", "gateway", None), run.log[-2000:]
    assert "max_model_calls=20" in r.failure_message and "7" in r.failure_message
    assert [p.name for p in r.phases if p.status == "failed"] == ["probe"]
    assert not (run.result_dir / "phase-agent-turn-1-events.jsonl").exists()
    assert run.token_rows() == [], "no model call before the checks pass"
    meta = read_record(run.result_dir / "meta.json", AttemptMeta)
    assert meta.trajectory == TrajectoryReport(written=True, schema_version=SCHEMA_VERSION, steps=1, agent_steps=0)
    trajectory = read_record(run.result_dir / "trajectory.json", Trajectory)
    assert [step.source for step in trajectory.steps] == ["user"], "the instruction alone: still valid ATIF"


def test_ask_user_ends_the_task_and_it_is_still_scored(run_task: RunFn) -> None:
    asks = policy(RENAME_MATCH, LOOK_STEPS, "Which name should the directory get?\nASK_USER")
    run = run_task("codex", RENAME_TASK, {"asks": asks})
    r = run.result
    assert (r.status, r.protocol_word, r.termination_reason, r.score) == (
        "completed", "ASK_USER", "completed", 0.0), run.log[-2000:]
