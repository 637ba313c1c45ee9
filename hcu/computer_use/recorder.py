"""Recording around each tool call: what was asked, what was answered (or raised), when, and the screen after.

The call itself runs exactly as without recording: its result is returned, its error raised, both untouched.
A failure of the recording is logged and costs only the record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
from mcp import types

from .call_log import BeginRecord, CallLog, CallRecord, clip
from .step_shots import take_shot

log = logging.getLogger("computer_use")

POINTER_TOOLS = frozenset({"click", "move", "drag", "mouse_down", "mouse_up", "scroll"})
ACTION_TOOLS = POINTER_TOOLS | {"type", "key", "hold_key", "act", "set_text"}
"""Calls that change the screen: each is followed by a shot of it."""
SCREENSHOT_TOOL = "screenshot"
"""Its own image (what the model was shown) is kept as the shot."""


class Recorder:
    def __init__(self, call_log: CallLog) -> None:
        self.call_log = call_log

    async def around(self, tool: str, arguments: dict[str, Any], call: Callable[[], Awaitable[Any]]) -> Any:
        seq, started = self.call_log.next_seq(), time.time()
        self._begin(seq, tool, started)
        try:
            result = await call()
        except Exception as exc:
            self._record(seq, tool, arguments, started, None, exc)
            raise
        record = self._record(seq, tool, arguments, started, result, None)
        if record is not None and not record.error:
            await anyio.to_thread.run_sync(self._shot, seq, tool, result)
        return result

    def _begin(self, seq: int, tool: str, started: float) -> None:
        try:
            self.call_log.write(BeginRecord(process=self.call_log.process, seq=seq, tool=tool, at=started),
                                drop_record=True)
        except Exception as exc:  # noqa: BLE001 - evidence never fails a call
            log.warning("recording call %d (%s) failed: %s", seq, tool, exc)

    def _record(self, seq: int, tool: str, arguments: dict[str, Any], started: float, result: Any,
                error: Exception | None) -> CallRecord | None:
        try:
            record = call_record(self.call_log.process, seq, tool, arguments, started, result, error)
            self.call_log.write_call(record)
            return record
        except Exception as exc:  # noqa: BLE001 - evidence never fails a call
            log.warning("recording call %d (%s) failed: %s", seq, tool, exc)
            return None

    def _shot(self, seq: int, tool: str, result: Any) -> None:
        if tool in ACTION_TOOLS:
            take_shot(self.call_log, seq, pointer=tool in POINTER_TOOLS)
        elif tool == SCREENSHOT_TOOL and (image := _first_image(result)) is not None:
            take_shot(self.call_log, seq, pointer=False, image_b64=image)


def call_record(process: str, seq: int, tool: str, arguments: dict[str, Any], started: float, result: Any,
                error: Exception | None) -> CallRecord:
    clipped = 0
    kept_args: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            value, cut = clip(value)
            clipped += cut
        kept_args[key] = value
    content = list(getattr(result, "content", None) or [])
    text = str(error) if error is not None else "\n".join(c.text for c in content if isinstance(c, types.TextContent))
    text, cut = clip(text)
    images = [f"{c.mime_type} {_decoded_size(c.data)}" for c in content if isinstance(c, types.ImageContent)]
    return CallRecord(process=process, seq=seq, tool=tool, arguments=kept_args, started_at=started,
                      ended_at=time.time(), error=error is not None or bool(getattr(result, "is_error", False)),
                      result=text, images=images, clipped_chars=clipped + cut)


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")


def _first_image(result: Any) -> str | None:
    images = [c for c in getattr(result, "content", None) or [] if isinstance(c, types.ImageContent)]
    return images[0].data if images else None
