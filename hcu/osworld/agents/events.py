"""One accumulator for the four CLIs' event streams: trace items in order, the last message, the end state.
Each adapter maps its own event names onto these calls; the classification of the end lives here once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from hcu.osworld.agents.base import TurnOutcome, is_budget_refusal, protocol_word

NO_FINAL_EVENT = "the CLI ended without a final event (killed, crashed or cut off)"


class TraceItem(BaseModel):
    """One line of an attempt's agent.jsonl: an item `EventLog` made of the CLI's events, with the turn it came in
    (the attempt runner writes them; the viewer reads them back). A key this model does not name (a tool call's own
    fields, another hcu's) is kept."""

    model_config = ConfigDict(extra="allow")

    kind: str = "?"
    """output, message, reasoning, tool_call, tool_result, usage or error."""
    turn: int | None = None
    """1, then one per session resume."""
    text: str | None = None
    """A message, reasoning, error or line of other output."""
    name: str | None = None
    """A tool call's tool."""
    arguments: Any = None
    result: Any = None
    """A tool call's or tool result's result, shortened."""
    call_id: str | None = None
    is_error: bool | None = None
    usage: Any = None
    """The CLI's own report of its usage, as it gave it."""
    final: bool | None = None
    """An error the CLI ended on."""


class EventLog:
    def __init__(self) -> None:
        self.items: list[dict] = []
        self.session_id: str | None = None
        self.last_message: str | None = None
        self.tool_calls = 0
        self.errors: list[str] = []
        self._finished: bool | None = None
        self._final_error: str | None = None
        self._deltas: list[str] = []

    def lines(self, text: str) -> Iterator[dict]:
        """JSON objects of a JSONL stream; other lines (CLI banners, partial last line) are kept as notes."""
        for raw in text.splitlines():
            raw = raw.strip()
            if not raw:
                continue
            try:
                event = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self.items.append({"kind": "output", "text": raw[:2000]})
                continue
            if isinstance(event, dict):
                yield event

    def text_delta(self, text: str) -> None:
        """A streamed piece of the assistant's text; consecutive pieces make one message."""
        self._deltas.append(text)

    def _flush(self) -> None:
        if self._deltas:
            text, self._deltas = "".join(self._deltas), []
            self.message(text)

    def message(self, text: str) -> None:
        self._flush()
        if text:
            self.items.append({"kind": "message", "text": text})
            self.last_message = text

    def reasoning(self, text: str) -> None:
        self._flush()
        if text:
            self.items.append({"kind": "reasoning", "text": text})

    def tool_call(self, *, name: str, arguments: Any = None, result: Any = None, **extra: Any) -> None:
        self._flush()
        self.tool_calls += 1
        item = {"kind": "tool_call", "name": name, "arguments": arguments, "result": _short(result)}
        item.update({k: v for k, v in extra.items() if v is not None})
        self.items.append(item)

    def tool_result(self, *, call_id: str | None, result: Any, is_error: bool = False) -> None:
        """For CLIs that report the call and its result as two events."""
        self._flush()
        self.items.append({"kind": "tool_result", "call_id": call_id, "result": _short(result),
                           "is_error": is_error})

    def usage(self, usage: Any) -> None:
        self._flush()
        if usage:
            self.items.append({"kind": "usage", "usage": usage})

    def note_error(self, message: str) -> None:
        """An error the CLI reported on the way (it may still recover, e.g. "Reconnecting... 2/5")."""
        self._flush()
        if message:
            self.errors.append(message)
            self.items.append({"kind": "error", "text": message})

    def finish(self, *, succeeded: bool, error: str | None = None) -> None:
        """The CLI's own final event; the last one in the stream decides."""
        self._flush()
        self._finished = succeeded
        self._final_error = None if succeeded else (error or "the CLI reported a failure")
        if error and not succeeded:
            self.items.append({"kind": "error", "text": error, "final": True})

    def outcome(self) -> TurnOutcome:
        self._flush()
        succeeded = bool(self._finished)
        error = None
        if not succeeded:
            error = self._final_error or (self.errors[-1] if self.errors else NO_FINAL_EVENT)
        budget = error is not None and is_budget_refusal(error)
        return TurnOutcome(
            final_message=self.last_message,
            protocol_word=protocol_word(self.last_message),
            succeeded=succeeded,
            refused_budget=budget,
            error=error,
            tool_calls=self.tool_calls,
            session_id=self.session_id,
            turns=self.items,
        )


def _short(value: Any, limit: int = 4000) -> Any:
    """Tool results can carry screenshots: keep traces small and readable (base64 blobs are elided)."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return value if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"
