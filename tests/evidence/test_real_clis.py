"""Real tier: for each of the four real CLIs the scripted model plays steps (with words beside its calls, and a
rate limit that ends the first turn, so the session is resumed), and the trajectory collect_evidence builds holds
exactly those tool calls, in order, each action with the screen after it, and the gateway's token counts."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from PIL import Image

from hcu.osworld.agents.base import RESUME_PROMPT
from hcu.osworld.attempt.interrupts import StopSignals
from hcu.osworld.attempt.result import TaskResult
from hcu.osworld.attempt.usage import usage_for_scope
from hcu.osworld.errors import Interrupted
from hcu.osworld.evidence.atif import TRAJECTORY_NAME, Trajectory
from hcu.osworld.evidence.cli_trace import computer_use_tool
from hcu.record_io import write_record
from tests.evidence.live_agent import PROMPT, live_run, policy

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]
AGENTS = ["codex", "claude-code", "gemini-cli", "grok-build"]
STEPS = [
    {"tool": "screenshot", "arguments": {"max_width": 960}, "say": "First, a look at the screen."},
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}, "say": "Opening a terminal."},
    {"tool": "wait", "arguments": {"seconds": 2}},
    {"tool": "type", "arguments": {"text": "echo evidence > ~/evidence.txt\n"}, "say": "Writing the file."},
    {"tool": "click", "arguments": {"x": 100, "y": 100}},
]
SHOT_AFTER = {"screenshot", "key", "type", "click"}
THROTTLED = {"kind": "http", "status": 429, "at_step": 3, "until_text": RESUME_PROMPT}


def agent_calls(trajectory: Trajectory) -> list[tuple]:
    """(tool, arguments, result extra) of every call, in order, as computer-use tools."""
    out = []
    for step in trajectory.steps:
        for call, result in zip(step.tool_calls or [], step.observation.results if step.observation else [],
                                strict=True):
            tool, arguments = computer_use_tool(call.function_name, call.arguments) or (call.function_name, {})
            assert result.source_call_id == call.tool_call_id
            out.append((tool, arguments, result.extra))
    return out


def assert_screens(run, calls: list[tuple]) -> None:
    for tool, _, extra in calls:
        if tool in SHOT_AFTER:
            assert extra.screenshot and extra.screenshot.startswith("steps/"), (tool, extra)
            with Image.open(run.result_dir / extra.screenshot) as image:
                assert image.format == "JPEG" and image.width <= 1280
        else:
            assert extra.screenshot is None, (tool, extra)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("agent", AGENTS)
def test_trajectory_holds_the_played_calls_in_order_with_screens(agent, tmp_path):
    with live_run(agent, tmp_path, policy(STEPS, faults=[THROTTLED])) as run:
        outcome = run.run_agent()
        assert outcome.turns == 2 and outcome.protocol_word == "TASK_COMPLETE", outcome
        trajectory = run.collect(outcome.termination_reason)
    on_disk = Trajectory.model_validate_json((run.result_dir / TRAJECTORY_NAME).read_bytes())
    assert on_disk == trajectory
    calls = agent_calls(trajectory)
    assert [(tool, args) for tool, args, _ in calls] == [(s["tool"], s["arguments"]) for s in STEPS]
    assert all(extra.recorded_by == ["cli", "computer-use"] for _, _, extra in calls), calls
    assert all(extra.guest_started_at and extra.host_started_at and extra.duration_sec is not None
               for _, _, extra in calls)
    assert_screens(run, calls)
    click = calls[-1][2]
    # the screenshot before it was half size: its (100, 100) is the screen's (200, 200)
    assert (click.pointer.x, click.pointer.y, click.pointer.screen_width) == (200, 200, 1920)
    users = [s for s in trajectory.steps if s.source == "user"]
    assert [u.message for u in users] == [PROMPT, RESUME_PROMPT]
    agent_steps = [s for s in trajectory.steps if s.source == "agent"]
    said = {s["say"] for s in STEPS if s.get("say")}
    for step in agent_steps:
        for call in step.tool_calls or []:
            tool, arguments = computer_use_tool(call.function_name, call.arguments)
            played = next(s for s in STEPS if (s["tool"], s["arguments"]) == (tool, arguments))
            if played.get("say"):
                assert played["say"] in step.message, (agent, step)
    assert said <= {m for s in agent_steps for m in s.message.split("\n\n")}
    assert agent_steps[-1].message.endswith("TASK_COMPLETE") and not agent_steps[-1].tool_calls
    assert [s.step_id for s in trajectory.steps] == list(range(1, len(trajectory.steps) + 1))
    usage = usage_for_scope(run.token_log, run.ctx.scope)
    final = trajectory.final_metrics
    assert (final.total_prompt_tokens, final.total_completion_tokens, final.total_cached_tokens) == (
        usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
    assert final.extra["model_calls"] == usage.model_calls
    assert all(s.metrics and s.metrics.completion_tokens for s in agent_steps if s.tool_calls)
    assert trajectory.extra["clock_offset_sec"] is not None and trajectory.extra["dropped"] == []
    write_record(run.result_dir / "result.json", TaskResult(status="completed", usage=usage))
    mode = (run.result_dir / "result.json").stat().st_mode & 0o777
    kept = [run.result_dir / TRAJECTORY_NAME, *(run.result_dir / "steps").iterdir()]
    assert {path.stat().st_mode & 0o777 for path in kept} == {mode}, "evidence carries the results' permissions"


@pytest.mark.timeout(300)
def test_an_attempt_cut_by_the_budget_keeps_its_trajectory(tmp_path):
    steps = [{"tool": "click", "arguments": {"x": 50, "y": 60}}]
    with live_run("codex", tmp_path, policy(steps, never_finish=True), max_model_calls=3) as run:
        outcome = run.run_agent()
        assert outcome.termination_reason == "max_model_calls", outcome
        trajectory = run.collect(outcome.termination_reason)
    calls = agent_calls(trajectory)
    assert [(tool, args) for tool, args, _ in calls] == [("click", {"x": 50, "y": 60})] * 3
    assert_screens(run, calls)
    assert [r["outcome"] for r in trajectory.extra["unanswered_requests"]] == ["refused_budget"]
    assert trajectory.extra["ended"] == "max_model_calls"
    assert trajectory.final_metrics.extra["model_calls"] == 3


@pytest.mark.timeout(300)
def test_an_attempt_stopped_by_a_signal_keeps_its_trajectory(tmp_path):
    """The runner is stopped mid-turn: no turn kept its events, the CLI is still running when the collect phase
    reads the guest, and the calls computer-use recorded make the trajectory."""
    steps = [{"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}}, {"tool": "wait", "arguments": {"seconds": 30}}]
    with live_run("claude-code", tmp_path, policy(steps)) as run:
        stops = StopSignals()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        watcher = threading.Thread(target=_signal_during_second_call, args=(run,), daemon=True)
        try:
            stops.install()
            watcher.start()
            with pytest.raises(Interrupted), stops.armed():
                run.run_agent()
        finally:
            watcher.join(timeout=60)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        trajectory = run.collect("interrupted")
    calls = agent_calls(trajectory)
    assert [tool for tool, _, _ in calls] == ["key", "wait"]
    assert calls[0][1] == steps[0]["arguments"] and calls[0][2].screenshot
    assert calls[1][2].in_flight and calls[1][2].guest_ended_at is None, "the wait was cut short"
    assert all(extra.recorded_by == ["computer-use"] for _, _, extra in calls)
    assert not list(run.result_dir.glob("phase-agent-turn-*")), "the stopped turn kept no events"
    assert trajectory.extra["ended"] == "interrupted"


def _signal_during_second_call(run) -> None:
    deadline = time.monotonic() + 120
    while len(run.guest_records("begin")) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGTERM)
