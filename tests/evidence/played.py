"""The scripted play the evidence tests run through each real CLI, and what its trajectory must hold."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from hcu.osworld.agents.base import RESUME_PROMPT
from hcu.osworld.evidence.atif import SCHEMA_VERSION, Trajectory
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
    """(tool, arguments, result) of every call in order, as the computer-use tools they reached."""
    out = []
    for step in trajectory.steps:
        for call, result in zip(step.tool_calls or [], step.observation.results if step.observation else [],
                                strict=True):
            tool, arguments = computer_use_tool(call.function_name, call.arguments) or (call.function_name,
                                                                                        call.arguments)
            assert result.source_call_id == call.tool_call_id
            out.append((tool, arguments, result))
    return out


def assert_screens(result_dir: Path, calls: list[tuple]) -> None:
    """Each action's screen is an image content part of its result (ATIF's place for it), a JPEG in steps/, with
    the result's text as a text part beside it; nothing of it in `extra`."""
    for tool, _, result in calls:
        assert result.extra.screenshot is None, (tool, result)
        if tool in SHOT_AFTER:
            texts = [part for part in result.content if part.type == "text"]
            images = [part for part in result.content if part.type == "image"]
            assert len(texts) == 1 and texts[0].text == result.text and result.text, (tool, result)
            assert len(images) == 1 and images[0].source.media_type == "image/jpeg", (tool, result)
            assert result.screenshot == images[0].source.path and result.screenshot.startswith("steps/"), result
            with Image.open(result_dir / result.screenshot) as image:
                assert image.format == "JPEG" and image.width <= 1280
        else:
            assert result.screenshot is None and isinstance(result.content, str), (tool, result)


def assert_played(trajectory: Trajectory, result_dir: Path, token_log: Path, scope: str, prompt: str) -> None:
    """The trajectory of STEPS played with THROTTLED: every call in order with its screen and pointer, the words
    beside them, the resume, the final answer, and the gateway's token counts."""
    calls = agent_calls(trajectory)
    assert [(tool, args) for tool, args, _ in calls] == [(s["tool"], s["arguments"]) for s in STEPS]
    assert all(result.extra.recorded_by == ["cli", "computer-use"] for _, _, result in calls), calls
    assert all(result.extra.guest_started_at and result.extra.host_started_at and result.extra.duration_sec is not None
               for _, _, result in calls)
    assert_screens(result_dir, calls)
    click = calls[-1][2].extra
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
    assert all(s.llm_call_count == (1 if s.metrics else None) for s in agent_steps)
    assert trajectory.schema_version == SCHEMA_VERSION and trajectory.trajectory_id
