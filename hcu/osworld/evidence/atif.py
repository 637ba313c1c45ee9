"""`tasks/<id>/trajectory.json`: one attempt's steps in ATIF (the Agent Trajectory Interchange Format of Harbor's
RFC 0001), with hcu's additions under the format's own `extra` fields only.

The format's fields keep their meaning: `steps[].source` is "user" for the task instruction, "agent" for what the
model produced; a step's `metrics.prompt_tokens` includes its cached tokens; `llm_call_count` is 1 for a step
made by one generation the gateway logged. What ATIF leaves open is fixed here:
- screenshots are files in the task folder (`steps/<name>.jpg`), each an image content part of the result of the
  tool call that took it or showed it (`{"type": "image", "source": {"media_type": "image/jpeg", "path":
  "steps/..."}}`, the path relative to the trajectory's folder), beside the result's text part; never base64;
  trajectories of hcu before ATIF-v1.8 named the file in `ObservationResult.extra.screenshot` instead
  (`ObservationResult.screenshot` reads both);
- a pointer action (click, move, drag, scroll) says where it landed in screen pixels, with the screen size those
  pixels belong to (`ResultExtra.pointer`), so a viewer can mark it on a screenshot of any size;
- times are ISO 8601 in UTC; a tool call's guest times are the guest's clock, its host times the host's.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = "ATIF-v1.8"
"""The newest ATIF Harbor writes and reads (Harbor 0.26's `harbor.models.trajectories`)."""
STEPS_DIR = "steps"
"""The folder, inside the task folder, holding the step screenshots."""
MEDIA_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png"}
"""Image content parts by file suffix (computer-use keeps JPEGs; ATIF also takes PNG, GIF and WebP)."""


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
    extra: dict[str, Any] | None = None


class MediaSource(_Open):
    media_type: str
    path: str
    """A file relative to the trajectory's folder (or a URL, in trajectories from elsewhere)."""


class ContentPart(_Open):
    """One part of a multimodal message or tool result (ATIF-v1.6): text, or an image (audio since v1.8)."""

    type: str
    text: str | None = None
    source: MediaSource | None = None


def text_part(text: str) -> ContentPart:
    return ContentPart(type="text", text=text)


def image_part(path: str) -> ContentPart:
    """The image file `path` (relative to the trajectory's folder) as a content part."""
    media_type = MEDIA_TYPES.get(PurePosixPath(path).suffix.lower(), "image/jpeg")
    return ContentPart(type="image", source=MediaSource(media_type=media_type, path=path))


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
    """Written by hcu before ATIF-v1.8 only: the screen right after the action, a path relative to the task
    folder (now an image content part of the result)."""
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
    """The images the tool returned to the model, as `<mime type> <bytes>` (the file computer-use kept of the
    screen is the result's image content part)."""
    clipped_chars: int | None = None
    """Characters cut from the recorded result and arguments (computer-use keeps 20,000 of each)."""
    dropped: str | None = None
    """`size_cap`: computer-use kept no arguments or result of this call (the attempt's cap was spent)."""
    in_flight: bool | None = None
    """True: computer-use saw the call start, not end (the attempt ended during it); it has no result."""


class ObservationResult(_Open):
    source_call_id: str | None = None
    """The `tool_call_id` this result answers."""
    content: str | list[ContentPart] | None = None
    """The result's text; with a screenshot, a text part (when there is text) and the image part."""
    extra: ResultExtra | None = None

    @property
    def screenshot(self) -> str | None:
        """The screen this result kept: its first image part's path, or (hcu before ATIF-v1.8) `extra.screenshot`."""
        if isinstance(self.content, list):
            for part in self.content:
                if part.type == "image" and part.source is not None:
                    return part.source.path
        return self.extra.screenshot if self.extra is not None else None

    @property
    def text(self) -> str | None:
        """The result's text: the string, or its text parts joined (media parts left out)."""
        if not isinstance(self.content, list):
            return self.content
        texts = [part.text for part in self.content if part.type == "text" and part.text is not None]
        return "\n".join(texts) if texts else None


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
    llm_call_count: int | None = None
    """How many generations of the model the step stands for (1: the one the gateway logged); None: not known."""
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
    session_id: str | None = None
    """The CLI's session (the same across an attempt's resumed turns)."""
    trajectory_id: str | None = None
    """This document: the attempt id (one trajectory per attempt)."""
    agent: Agent
    steps: list[Step] = []
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None
    """hcu: `attempt_id`, `ended` (why the attempt ended: completed, max_model_calls, timeout, interrupted, a failure
    class), `size_cap_bytes` and `dropped` (what the per-attempt size cap left out), `clock_offset_sec` (guest
    clock minus host clock, as measured at collect: 0 when within the reading's round trip, `clock_uncertainty_sec`)."""
