"""What a scripted model upstream is asked (`ScriptedRequest`) and what it answers (`Reply`).

The seam: a `Responder` is any `async (ScriptedRequest) -> Reply`. The upstream renders the reply in the
wire format the request used (OpenAI Responses or Chat Completions, Anthropic Messages, Gemini), streamed or
not, so a responder never deals with wire details.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["openai_responses", "openai_chat", "anthropic", "gemini"]


@dataclass
class ScriptedRequest:
    api: Api
    provider: Literal["openai", "anthropic", "gemini"]
    path: str
    """Path as received (Azure prefixes included)."""
    query: dict[str, str]
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    """Parsed JSON body (None when empty)."""
    stream: bool
    model: str | None = None
    deployment: str | None = None
    """Azure deployment: from `/openai/deployments/<d>/...`, or the body's model under `/openai/v1/`."""
    count_tokens: bool = False
    task: str | None = None
    """The client's `x-task-id` header, if any (lets a test script replies per task)."""
    received_at: float = 0.0
    raw_body: bytes = b""
    """The body's bytes as they arrived (after the HTTP layer's own decoding of a Content-Encoding)."""


@dataclass
class Usage:
    """Same convention as the token log: input includes cached, output includes reasoning. The wire format's source:
    what a scripted reply says it used, written into each provider's usage fields (wire_*.py) for the gateway to
    parse as a `gateway.tokenlog.TokenUsage`; the scripted model's only."""

    input_tokens: int = 12
    cached_input_tokens: int = 0
    output_tokens: int = 7
    reasoning_tokens: int = 0


@dataclass
class TextReply:
    text: str = "ok"
    usage: Usage = field(default_factory=Usage)
    chunks: int = 2
    """Number of text deltas a stream splits the text into."""
    event_delay_sec: float = 0.0
    """Pause before each streamed event (slow streams)."""
    hold_open_sec: float = 0.0
    """Keep a stream open this long after its last event before ending it (an upstream's slow tail)."""


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Merged into the rendered item/block/part (e.g. a namespace field)."""


@dataclass
class ToolCallReply:
    calls: list[ToolCall]
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    event_delay_sec: float = 0.0


@dataclass
class HttpFault:
    """An HTTP error answer. 429 renders as each API's rate-limit error (Gemini RESOURCE_EXHAUSTED), 529 as
    Anthropic's overloaded_error, 5xx as a server error."""

    status: int = 429
    retry_after: str | None = None
    """Raw `retry-after` value: seconds or an HTTP date."""
    retry_after_ms: int | None = None
    reset_requests: str | None = None
    reset_tokens: str | None = None
    retry_delay: str | None = None
    """When to try again (e.g. "2s"): Gemini's RetryInfo `retryDelay` in the error details, the "Please try again
    in 2s" of OpenAI's message."""
    body: dict[str, Any] | None = None
    """Send this JSON body instead of the API's usual error body (e.g. an `insufficient_quota` 429)."""


@dataclass
class Hang:
    """Never answer (until the client goes away)."""


@dataclass
class CutStream:
    """Send the first `after_events` events of `reply`, then drop the connection (a non-stream request is
    dropped at once)."""

    after_events: int
    reply: TextReply | ToolCallReply = field(default_factory=TextReply)


@dataclass
class StreamError:
    """HTTP 200 stream ending in an error event: after the preamble only (`partial=None`), or after the
    content of `partial`. kind: rate_limit (OpenAI rate_limit_exceeded, Anthropic rate_limit_error, Gemini
    RESOURCE_EXHAUSTED), overloaded (Anthropic overloaded_error) or server. A non-stream request gets the
    matching HttpFault instead."""

    kind: Literal["rate_limit", "overloaded", "server"] = "rate_limit"
    partial: TextReply | None = None
    openai_event: Literal["response.failed", "error"] = "response.failed"
    retry_delay: str | None = None
    """When to try again, e.g. "2s": Gemini's RetryInfo `retryDelay`, OpenAI's "Please try again in 2s"."""


@dataclass
class Held:
    """Send `reply` up to its last `keep_last` events (a non-stream answer: nothing), wait for `release`, then
    the rest: a test decides when the upstream finishes, instead of a delay deciding it."""

    reply: TextReply | ToolCallReply
    release: asyncio.Event
    keep_last: int = 1
    sent: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once everything before the held part went out."""


@dataclass
class RawReply:
    """Exactly these bytes, status and headers, whatever the request asked for (a misbehaving upstream):
    `chunks` go out one write each."""

    chunks: list[bytes]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    cut: bool = False
    """Drop the connection after the chunks instead of ending the body (a mid-stream cut)."""


Reply = TextReply | ToolCallReply | HttpFault | Hang | CutStream | StreamError | Held | RawReply
Responder = Callable[[ScriptedRequest], Awaitable[Reply]]
