"""The scripted play the evidence tests run through each real CLI, and what its trajectory must hold."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from hcu.osworld.agents.base import RESUME_PROMPT
from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.evidence.cli_trace import computer_use_tool
from hcu.osworld.records.usage import usage_for_scope

AGENTS = ["codex", "claude-code", "gemini-cli", "grok-build"]
STEPS = [
    {"tool": "screenshot", "arguments": {"max_width": 960}, "say": "First, a look at the screen."},
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}, "say": "Opening a terminal."},
    {"tool": "wait", "arguments": {"seconds": 2}},
    {"tool": "type", "arguments": {"text": "echo evidence > ~/evidence.txt\n"}, "say": "Writing the file."},
    {"tool": "click", "arguments": {"x": 100, "y": 100}},
]
FINAL = "All steps done.\nTASK_COMPLETE"
THROTTLED = {"kind": "http", "status": 429, "at_step": 3, "until_text": RESUME_PROMPT}
"""Ends the first turn on a rate limit before the typing step: the runner resumes the session."""
SHOT_AFTER = {"screenshot", "key", "type", "click"}


def agent_calls(trajectory: Trajectory) -> list[tuple]:
    """(tool, arguments, result extra) of every call in order, as the computer-use tools they reached."""
    out = []
    for step in trajectory.steps:
        for call, result in zip(step.tool_calls or [], step.observation.results if step.observation else [],
                                strict=True):
            tool, arguments = computer_use_tool(call.function_name, call.arguments) or (call.function_name,
                                                                                        call.arguments)
            assert result.source_call_id == call.tool_call_id
            out.append((tool, arguments, result.extra))
    return out


def assert_screens(result_dir: Path, calls: list[tuple]) -> None:
    for tool, _, extra in calls:
        if tool in SHOT_AFTER:
            assert extra.screenshot and extra.screenshot.startswith("steps/"), (tool, extra)
            with Image.open(result_dir / extra.screenshot) as image:
                assert image.format == "JPEG" and image.width <= 1280
        else:
            assert extra.screenshot is None, (tool, extra)


def assert_played(trajectory: Trajectory, result_dir: Path, token_log: Path, scope: str, prompt: str) -> None:
    """The trajectory of STEPS played with THROTTLED: every call in order with its screen and pointer, the words
    beside them, the resume, the final answer, and the gateway's token counts."""
    calls = agent_calls(trajectory)
    assert [(tool, args) for tool, args, _ in calls] == [(s["tool"], s["arguments"]) for s in STEPS]
    assert all(extra.recorded_by == ["cli", "computer-use"] for _, _, extra in calls), calls
    assert all(extra.guest_started_at and extra.host_started_at and extra.duration_sec is not None
               for _, _, extra in calls)
    assert_screens(result_dir, calls)
    click = calls[-1][2]
    # in screen pixels: the resumed turn's server has shown no screenshot yet, so its scale is 1
    assert (click.pointer.x, click.pointer.y, click.pointer.screen_width) == (100, 100, 1920)
    assert [s.message for s in trajectory.steps if s.source == "user"] == [prompt, RESUME_PROMPT]
    agent_steps = [s for s in trajectory.steps if s.source == "agent"]
    for step in agent_steps:
        for call in step.tool_calls or []:
            played = next(s for s in STEPS if (s["tool"], s["arguments"]) == computer_use_tool(
                call.function_name, call.arguments))
            assert step.message == played.get("say", ""), (step.message, played)
    assert agent_steps[-1].message == FINAL and not agent_steps[-1].tool_calls
    assert [s.step_id for s in trajectory.steps] == list(range(1, len(trajectory.steps) + 1))
    usage = usage_for_scope(token_log, scope)
    final = trajectory.final_metrics
    assert (final.total_prompt_tokens, final.total_completion_tokens, final.total_cached_tokens) == (
        usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
    assert final.extra["model_calls"] == usage.model_calls
    assert all(s.metrics and s.metrics.completion_tokens for s in agent_steps if s.tool_calls)
