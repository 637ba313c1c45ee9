"""`tasks/<id>/trajectory.json`: one attempt's steps in ATIF (the Agent Trajectory Interchange Format of Harbor's
RFC 0001), with hcu's additions under the format's own `extra` fields.

The format's fields keep their meaning: `steps[].source` is "user" for the task instruction, "agent" for what the
model produced; a step's `metrics.prompt_tokens` includes its cached tokens. What ATIF leaves open is fixed here:
- screenshots are files in the task folder (`steps/<name>.jpg`), referenced by relative path from the result of
  the tool call that took them (`ObservationResult.extra.screenshot`), never base64 in the JSON;
- a pointer action (click, move, drag, scroll) says where it landed in screen pixels, with the screen size those
  pixels belong to (`ResultExtra.pointer`), so a viewer can mark it on a screenshot of any size;
- times are ISO 8601 in UTC; a tool call's guest times are the guest's clock, its host times the host's.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = "ATIF-v1.5"
STEPS_DIR = "steps"
"""The folder, inside the task folder, holding the step screenshots."""


class _Open(BaseModel):
    """ATIF objects: the format allows fields it does not name, so reading one never fails on them."""

    model_config = ConfigDict(extra="allow")


class Agent(_Open):
    name: str
    """The agent CLI, by its registered name (`hcu.osworld.agents.AGENT_NAMES`)."""
    version: str
    """What the CLI's `--version` printed in the guest."""
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class ToolCall(_Open):
    tool_call_id: str
    function_name: str
    """The tool as the CLI named it (e.g. `mcp__computer-use__click`)."""
    arguments: dict[str, Any] = {}


class Pointer(BaseModel):
    x: float
    y: float
    """Where the action landed, in screen pixels."""
    screen_width: int
    screen_height: int
    """The screen those pixels belong to (a screenshot of another size scales the point)."""


class ResultExtra(_Open):
    error: bool = False
    """The tool call failed; `content` holds its error text."""
    screenshot: str | None = None
    """The screen right after the action: a path relative to the task folder (`steps/...`)."""
    pointer: Pointer | None = None
    guest_started_at: str | None = None
    guest_ended_at: str | None = None
    """The call's start and end on the guest's clock (computer-use records them inside the guest)."""
    duration_sec: float | None = None
    host_started_at: str | None = None
    host_ended_at: str | None = None
    """The same two moments on the host's clock (guest times minus the measured clock offset), the clock of the
    generations' times."""
    recorded_by: list[Literal["cli", "computer-use"]] = []
    """Who saw the call: the CLI's events (its name and arguments), computer-use (its result, times, screen)."""
    images: list[str] | None = None
    """The result's images as `<mime type> <bytes>` (the image after an action is `screenshot`)."""
    clipped_chars: int | None = None
    """Characters cut from the recorded result and arguments (computer-use keeps 20,000 of each)."""
    dropped: str | None = None
    """`size_cap`: computer-use kept no arguments or result of this call (the attempt's cap was spent)."""
    in_flight: bool | None = None
    """True: computer-use saw the call start, not end (the attempt ended during it); it has no result."""


class ObservationResult(_Open):
    source_call_id: str | None = None
    """The `tool_call_id` this result answers."""
    content: str | list[Any] | None = None
    extra: ResultExtra | None = None


class Observation(_Open):
    results: list[ObservationResult] = []


class StepMetrics(_Open):
    prompt_tokens: int | None = None
    """Input tokens of the generation that produced the step, cached ones included."""
    completion_tokens: int | None = None
    """Output tokens, reasoning included."""
    cached_tokens: int | None = None
    cost_usd: float | None = None
    extra: dict[str, Any] | None = None
    """hcu: `reasoning_tokens`, `latency_sec` (the generation's wall time at the gateway), `rate_limit_wait_sec`."""


class Step(_Open):
    step_id: int
    """1-based, in order."""
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | None = None
    message: str = ""
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: StepMetrics | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Open):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    """None when the run has no price for the model: unknown, never 0."""
    total_steps: int | None = None
    extra: dict[str, Any] | None = None


def iso_time(unix: float | None) -> str | None:
    """A Unix time as the ISO 8601 UTC text every time in a trajectory is written in."""
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Trajectory(_Open):
    schema_version: str = SCHEMA_VERSION
    session_id: str
    agent: Agent
    steps: list[Step] = []
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None
    """hcu: `attempt_id`, `ended` (why the attempt ended: completed, max_model_calls, timeout, interrupted, a failure
    class), `size_cap_bytes` and `dropped` (what the per-attempt size cap left out), `clock_offset_sec` (guest
    clock minus host clock, as measured at collect)."""
