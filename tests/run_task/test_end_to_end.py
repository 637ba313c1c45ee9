"""One OSWorld task end to end, for each of the four real agent CLIs: real guest (test desktop), real CLI,
real gateway, official evaluator; only the model is a scripted policy."""

from __future__ import annotations

import pytest

from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.evidence.cli_trace import computer_use_tool
from hcu.record_io import read_record
from tests.run_task.conftest import (
    INFEASIBLE_MATCH,
    INFEASIBLE_TASK,
    LOOK_STEPS,
    RENAME_MATCH,
    RENAME_STEPS,
    RENAME_TASK,
    RunFn,
    policy,
)

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]
AGENTS = ["codex", "claude-code", "gemini-cli", "grok-build"]
PHASES = ["load", "boot", "isolate", "upload", "probe", "setup", "agent", "settle", "save desktop", "evaluate",
          "collect", "cleanup"]


@pytest.mark.parametrize("agent", AGENTS)
def test_policy_that_solves_the_task_scores_one(agent: str, run_task: RunFn) -> None:
    run = run_task(agent, RENAME_TASK, {"rename": policy(RENAME_MATCH, RENAME_STEPS)})
    r = run.result
    assert (r.status, r.score, r.termination_reason, r.protocol_word) == (
        "completed", 1.0, "completed", "TASK_COMPLETE"), run.log[-2000:]
    assert [p.name for p in r.phases] == PHASES and all(p.status == "ok" for p in r.phases)
    assert r.settle_seconds == 1, "the guest settles before evaluation, recorded"
    counted = [row for row in run.token_rows() if row["counted"]]
    assert r.usage is not None and r.usage.model_calls == len(counted) >= len(RENAME_STEPS) + 1
    assert r.usage.fully_accounted and r.usage.output_tokens > 0
    assert all(row["task"] == run.scope for row in run.token_rows())
    assert run.scope == f"{r.run_id}.{RENAME_TASK}.a1", "the scope is the run's own"
    for name in ("final-before-eval.png", "final-after-eval.png", "meta.json", "agent.jsonl", "attempt.json"):
        assert (run.result_dir / name).is_file(), name
    trajectory = read_record(run.result_dir / "trajectory.json", Trajectory)  # the runner collected it
    calls = [computer_use_tool(call.function_name, call.arguments)
             for step in trajectory.steps for call in step.tool_calls or []]
    assert [tool for tool, _ in calls] == [step["tool"] for step in RENAME_STEPS], "every step, as the CLI named it"
    shots = [result.screenshot for step in trajectory.steps for result in (step.observation.results
             if step.observation else []) if result.screenshot]
    assert shots and all((run.result_dir / shot).is_file() for shot in shots)
    assert trajectory.final_metrics.total_completion_tokens == r.usage.output_tokens


@pytest.mark.parametrize("agent", AGENTS)
def test_policy_that_does_nothing_scores_zero(agent: str, run_task: RunFn) -> None:
    run = run_task(agent, RENAME_TASK, {"look": policy(RENAME_MATCH, LOOK_STEPS)})
    r = run.result
    assert (r.status, r.score, r.termination_reason) == ("completed", 0.0, "completed"), run.log[-2000:]


@pytest.mark.parametrize("agent", AGENTS)
def test_infeasible_task_scores_one_on_task_infeasible(agent: str, run_task: RunFn) -> None:
    final = "There is no Bluetooth adapter on this machine.\nTASK_INFEASIBLE"
    run = run_task(agent, INFEASIBLE_TASK, {"no-bt": policy(INFEASIBLE_MATCH, LOOK_STEPS, final)})
    r = run.result
    assert (r.status, r.score, r.protocol_word) == ("completed", 1.0, "TASK_INFEASIBLE"), run.log[-2000:]


def test_infeasible_task_scores_zero_when_the_agent_claims_success(run_task: RunFn) -> None:
    run = run_task("codex", INFEASIBLE_TASK, {"claims": policy(INFEASIBLE_MATCH, LOOK_STEPS)})
    assert (run.result.status, run.result.score) == ("completed", 0.0), run.log[-2000:]
