"""The trajectory built offline from the files a real run of each CLI left (fixtures/, recorded by
record_fixtures.py from the real tier's play): the guest is gone, its call log and screenshots were brought
home, the turns' events and the token log are on disk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from hcu.osworld.agents.base import AgentContext
from hcu.osworld.evidence.collect import collect_evidence
from tests.evidence.played import AGENTS, agent_calls, assert_played
from tests.evidence.record_fixtures import CONTEXT, FIXTURES, TOKEN_LOG


def kept_run(agent: str, tmp_path: Path) -> tuple[Path, AgentContext, dict]:
    fixture = FIXTURES / agent
    assert fixture.is_dir(), f"{fixture} is missing: record it with `python -m tests.evidence.record_fixtures {agent}`"
    context = orjson.loads((fixture / CONTEXT).read_bytes())
    result_dir = tmp_path / "result"
    shutil.copytree(fixture, result_dir, ignore=shutil.ignore_patterns(CONTEXT, TOKEN_LOG))
    for name, kept_at in context["turn_ended_at"].items():  # when the runner kept each turn's events
        os.utime(result_dir / name, (kept_at, kept_at))
    ctx = AgentContext(**context["ctx"], base_instructions="(not kept)")
    return result_dir, ctx, context


@pytest.mark.parametrize("agent", AGENTS)
def test_the_trajectory_of_a_real_run_from_its_kept_files(agent, tmp_path):
    result_dir, ctx, context = kept_run(agent, tmp_path)
    token_log = FIXTURES / agent / TOKEN_LOG
    trajectory = collect_evidence(None, result_dir, agent=agent, ctx=ctx, agent_version=context["agent_version"],
                                  token_log=token_log, ended="completed")
    assert_played(trajectory, result_dir, token_log, ctx.scope, ctx.prompt)
    assert trajectory.agent.version == context["agent_version"] and trajectory.agent.name == agent
    assert trajectory.extra["collect_errors"] == ["no guest to collect from (it never started or is gone)"]


@pytest.mark.parametrize("agent", AGENTS)
def test_without_a_token_log_the_calls_are_all_there_without_tokens(agent, tmp_path):
    result_dir, ctx, context = kept_run(agent, tmp_path)
    trajectory = collect_evidence(None, result_dir, agent=agent, ctx=ctx, agent_version=context["agent_version"],
                                  token_log=None, ended="completed")
    assert len(agent_calls(trajectory)) == 5
    assert trajectory.final_metrics.total_prompt_tokens is None and trajectory.final_metrics.total_cost_usd is None


def test_without_the_call_log_the_clis_words_and_calls_remain(tmp_path):
    result_dir, ctx, context = kept_run("claude-code", tmp_path)
    (result_dir / "calls.jsonl").unlink()
    trajectory = collect_evidence(None, result_dir, agent="claude-code", ctx=ctx, token_log=FIXTURES / "claude-code" /
                                  TOKEN_LOG, agent_version=context["agent_version"], ended="completed")
    calls = agent_calls(trajectory)
    assert [tool for tool, _, _ in calls] == ["screenshot", "key", "wait", "type", "click"]
    assert all(result.extra.recorded_by == ["cli"] and result.screenshot is None for _, _, result in calls)
