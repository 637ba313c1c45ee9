"""hcu's trajectories read by Harbor's own ATIF code (`harbor.utils.trajectory_validator`, `harbor.models.
trajectories`): those of a real run of each of the four CLIs (built from the files the real tier kept, fixtures/),
each action's screen an image Harbor finds, and an attempt that ended before its agent made a step."""

from __future__ import annotations

import pytest

from hcu.osworld.agents.base import AgentContext
from hcu.osworld.evidence.atif import SCHEMA_VERSION
from hcu.osworld.evidence.collect import collect_evidence
from hcu.osworld.records.layout import TRAJECTORY_FILE
from tests.evidence.played import AGENTS, SHOT_AFTER, STEPS, agent_calls
from tests.evidence.record_fixtures import FIXTURES, TOKEN_LOG
from tests.evidence.test_kept_files import kept_run
from tests.harbor.harbor_env import harbor_reads

pytestmark = [pytest.mark.harbor]


def test_the_trajectories_of_a_real_run_of_every_cli_are_valid_atif_with_their_screens(tmp_path):
    files, expected = [], {}
    for agent in AGENTS:
        result_dir, ctx, context = kept_run(agent, tmp_path / agent)
        trajectory = collect_evidence(None, result_dir, agent=agent, ctx=ctx, agent_version=context["agent_version"],
                                      token_log=FIXTURES / agent / TOKEN_LOG, ended="completed",
                                      attempt_id=f"run/{agent}/1")
        files.append(result_dir / TRAJECTORY_FILE)
        expected[str(files[-1])] = (trajectory, [result.screenshot for _, _, result in agent_calls(trajectory)
                                                 if result.screenshot])
    assert all(len(shots) == sum(s["tool"] in SHOT_AFTER for s in STEPS) for _, shots in expected.values())
    for report in harbor_reads("trajectories", *files):
        trajectory, shots = expected[report["file"]]
        assert report["valid"] and report["errors"] == [], report
        assert report["schema_version"] == SCHEMA_VERSION and report["trajectory_id"] == trajectory.trajectory_id
        assert report["multimodal"] and report["images"] == shots, "Harbor finds every screen, in order"
        assert report["steps"] == [step.source for step in trajectory.steps]
        assert [count for count, source in zip(report["llm_call_count"], report["steps"], strict=True)
                if source == "agent"] == [1 if s.metrics else None for s in trajectory.steps if s.source == "agent"]
        assert all(count is None for count, source in zip(report["llm_call_count"], report["steps"], strict=True)
                   if source == "user")


def test_an_attempt_that_ended_before_its_agent_made_a_step_is_valid_atif(tmp_path):
    """The guest failed to boot: no guest, no turn, no call log, no token log; the instruction is the only step."""
    ctx = AgentContext(scope="run.t.a1", gateway_url="http://127.0.0.1:9", model="gpt-5.5", effort="high",
                       channels=["gui"], base_instructions="(not kept)", prompt="Do the task.",
                       session_id="0a1b2c3d-0000-4000-8000-000000000001")
    result_dir = tmp_path / "result"
    result_dir.mkdir()
    trajectory = collect_evidence(None, result_dir, agent="codex", ctx=ctx, agent_version=None, token_log=None,
                                  ended="guest", attempt_id="run/t/1")
    assert [step.source for step in trajectory.steps] == ["user"]
    [report] = harbor_reads("trajectories", result_dir / TRAJECTORY_FILE)
    assert report["valid"] and report["errors"] == [] and report["steps"] == ["user"], report
    assert report["images"] == [] and report["trajectory_id"] == "run/t/1"
