"""OpenAI wire formats for the scripted upstream: Responses and Chat Completions bodies, their SSE event
sequences and the OpenAI error body."""

from __future__ import annotations

import time
from typing import Any

import orjson

from hcu.scripted.replies import ScriptedRequest, StreamError, TextReply, Usage
from hcu.scripted.wire import Content, calls_of, new_id, split_text, sse

# ---- OpenAI Responses -------------------------------------------------------------------------------------


def _responses_usage(u: Usage) -> dict:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def _responses_items(reply: Content) -> list[dict]:
    items: list[dict] = []
    if (text := reply.text) is not None:
        items.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
            }
        )
    for call in calls_of(reply):
        items.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id or new_id("call_"),
                "name": call.name,
                "arguments": orjson.dumps(call.arguments).decode(),
                **call.extra,
            }
        )
    return items


def _response(rid: str, model: str, status: str, output: list, usage: dict | None, error: Any = None) -> dict:
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": error,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        "text": {"format": {"type": "text"}},
    }


class _Seq:
    """OpenAI Responses events carry an increasing sequence_number."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, event: str, **fields: Any) -> bytes:
        obj = {"type": event, "sequence_number": self.n, **fields}
        self.n += 1
        return sse(event, obj)


def responses_body(req: ScriptedRequest, reply: Content) -> dict:
    return _response(
        new_id("resp_"), req.model or "", "completed", _responses_items(reply), _responses_usage(reply.usage)
    )


def _responses_item_events(seq: _Seq, index: int, item: dict, chunks: int) -> list[bytes]:
    if item["type"] == "message":
        text = item["content"][0]["text"]
        events = [
            seq(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            ),
            seq(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            ),
        ]
        events += [
            seq(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
            for piece in split_text(text, chunks)
        ]
        events += [
            seq(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            ),
            seq(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            ),
        ]
    else:
        events = [
            seq(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            ),
            seq(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            ),
            seq(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            ),
        ]
    return events + [seq("response.output_item.done", output_index=index, item=item)]


def responses_events(
    req: ScriptedRequest, reply: Content | None, error: StreamError | None = None
) -> list[bytes]:
    seq, rid, model = _Seq(), new_id("resp_"), req.model or ""
    events = [
        seq("response.created", response=_response(rid, model, "in_progress", [], None)),
        seq("response.in_progress", response=_response(rid, model, "in_progress", [], None)),
    ]
    items = _responses_items(reply) if reply is not None else []
    chunks = reply.chunks if isinstance(reply, TextReply) else 1
    for index, item in enumerate(items):
        events += _responses_item_events(seq, index, item, chunks)
    if error is None:
        assert reply is not None
        return events + [
            seq(
                "response.completed",
                response=_response(rid, model, "completed", items, _responses_usage(reply.usage)),
            )
        ]
    err = openai_error(error.kind, error.retry_delay)["error"]
    if error.openai_event == "error":
        return events + [seq("error", code=err["code"], message=err["message"], param=None)]
    failed = _response(rid, model, "failed", items, None, {"code": err["code"], "message": err["message"]})
    return events + [seq("response.failed", response=failed)]


# ---- OpenAI Chat Completions ------------------------------------------------------------------------------


def _chat_usage(u: Usage) -> dict:
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


def _chat_toolcalls_of(reply: Content) -> list[dict]:
    return [
        {
            "id": c.call_id or new_id("call_"),
            "type": "function",
            "function": {"name": c.name, "arguments": orjson.dumps(c.arguments).decode()},
            **c.extra,
        }
        for c in calls_of(reply)
    ]


def chat_body(req: ScriptedRequest, reply: Content) -> dict:
    calls = _chat_toolcalls_of(reply)
    message: dict = {"role": "assistant", "content": reply.text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model or "",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": _chat_usage(reply.usage),
    }


def chat_events(req: ScriptedRequest, reply: Content | None, error: StreamError | None = None) -> list[bytes]:
    cid, created, model = new_id("chatcmpl-"), int(time.time()), req.model or ""

    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> bytes:
        return sse(
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            },
        )

    events = [chunk({"role": "assistant", "content": ""})]
    if reply is not None:
        chunks = reply.chunks if isinstance(reply, TextReply) else 1
        events += [chunk({"content": piece}) for piece in split_text(reply.text or "", chunks) if piece]
        calls = _chat_toolcalls_of(reply)
        events += [chunk({"tool_calls": [{"index": i, **call}]}) for i, call in enumerate(calls)]
    if error is not None:
        return events + [sse(None, openai_error(error.kind, error.retry_delay))]
    assert reply is not None
    events.append(chunk({}, "tool_calls" if calls_of(reply) else "stop"))
    events.append(
        sse(
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": _chat_usage(reply.usage),
            },
        )
    )
    return events + [b"data: [DONE]\n\n"]


def openai_error(kind: str, retry_delay: str | None = None) -> dict:
    """The error body of `kind`; a rate limit's message says when to try again (`retry_delay`, e.g. "1.5s",
    else 1s), as OpenAI's and Azure's do."""
    if kind == "rate_limit":
        return {
            "error": {
                "message": f"Rate limit reached. Please try again in {retry_delay or '1s'}.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
                "param": None,
            }
        }
    return {
        "error": {
            "message": "The server had an error.",
            "type": "server_error",
            "code": "server_error",
            "param": None,
        }
    }
