"""A scripted model upstream: one aiohttp app speaking OpenAI (Responses, Chat Completions, also under Azure
paths), Anthropic Messages and Gemini, streaming and not. What it answers comes from a `Responder`
(see `hcu.scripted.replies`); every request is recorded for tests to inspect.

    python -m hcu.scripted.upstream --host 127.0.0.1 --port P [--rate-limits FILE]

`build_app(responder)` gives the app for any responder (a conversation-driven policy plugs in here). With a
`RateLimiter` (rate_limits.py) it enforces per-deployment quotas as Azure does, before the responder is asked.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import defaultdict, deque
from pathlib import Path

import orjson
from aiohttp import web
from pydantic import ValidationError

from hcu.flags import describe_error
from hcu.scripted import wire, wire_anthropic, wire_gemini, wire_openai
from hcu.scripted.rate_limits import Charge, RateLimiter, RateLimitSpec
from hcu.scripted.replies import (
    CutStream,
    Hang,
    Held,
    HttpFault,
    RawReply,
    Reply,
    Responder,
    ScriptedRequest,
    StreamError,
    TextReply,
)

_GEMINI = re.compile(r"^/(?:v1|v1beta)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
_AZURE_DEPLOYMENT = re.compile(r"^/openai/deployments/([^/]+)(/.*)$")
DEFAULT_REMAINING_TOKENS = 100_000

BODIES = {
    "openai_responses": wire_openai.responses_body,
    "openai_chat": wire_openai.chat_body,
    "anthropic": wire_anthropic.anthropic_body,
    "gemini": wire_gemini.gemini_body,
}
EVENTS = {
    "openai_responses": wire_openai.responses_events,
    "openai_chat": wire_openai.chat_events,
    "anthropic": wire_anthropic.anthropic_events,
    "gemini": wire_gemini.gemini_events,
}


class QueueResponder:
    """Answers from queues of replies: the deployment's queue first, then the task's (`x-task-id`), then the
    shared one, else `default`."""

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default if default is not None else TextReply()
        self.queues: dict[tuple[str, str | None], deque[Reply]] = defaultdict(deque)

    def push(self, *replies: Reply, task: str | None = None, deployment: str | None = None) -> None:
        key = ("deployment", deployment) if deployment else ("task", task) if task else ("all", None)
        self.queues[key].extend(replies)

    async def __call__(self, req: ScriptedRequest) -> Reply:
        for key in (("deployment", req.deployment), ("task", req.task), ("all", None)):
            if key[1] is not None or key[0] == "all":
                queue = self.queues.get(key)
                if queue:
                    return queue.popleft()
        return self.default


class ScriptedUpstream:
    """State of one scripted upstream: the responder, the request record, per-deployment remaining tokens (or,
    with a limiter, its quotas)."""

    def __init__(self, responder: Responder | None = None, limiter: RateLimiter | None = None) -> None:
        self.responder: Responder = responder or QueueResponder()
        self.limiter = limiter
        self.requests: list[ScriptedRequest] = []
        self.remaining_tokens: dict[str, int] = {}
        """Per deployment ("" when none) for `x-ratelimit-remaining-tokens` (without a limiter)."""

    def headers_for(self, req: ScriptedRequest, charge: Charge | None = None) -> dict[str, str]:
        rid = wire.new_id("req_")
        ids = {"x-request-id": rid, "request-id": rid}
        if charge is not None:
            return {**ids, **charge.headers}
        if self.limiter is not None:
            return {**ids, **self.limiter.headers(req)}
        remaining = self.remaining_tokens.get(req.deployment or "", DEFAULT_REMAINING_TOKENS)
        return {**ids, "x-ratelimit-remaining-tokens": str(remaining), "x-ratelimit-remaining-requests": "1000"}


STATE = web.AppKey("scripted_upstream", ScriptedUpstream)


def parse_request(request: web.Request, body: object, raw: bytes = b"") -> ScriptedRequest | None:
    """Which API a request speaks; None for an unknown path."""
    path, deployment = request.path, None
    obj = body if isinstance(body, dict) else {}
    if path.startswith("/openai/v1/"):  # Azure's v1 API: the body's model names the deployment
        path, deployment = path[len("/openai") :], obj.get("model")
    elif match := _AZURE_DEPLOYMENT.match(path):
        deployment, path = match[1], "/v1" + match[2]
    model, count, stream = obj.get("model"), False, bool(obj.get("stream"))
    if path == "/v1/responses":
        api, provider = "openai_responses", "openai"
    elif path == "/v1/chat/completions":
        api, provider = "openai_chat", "openai"
    elif path in ("/v1/messages", "/v1/messages/count_tokens"):
        api, provider, count = "anthropic", "anthropic", path.endswith("count_tokens")
    elif match := _GEMINI.match(path):
        api, provider, model = "gemini", "gemini", match[1]
        count, stream = match[2] == "countTokens", match[2] == "streamGenerateContent"
    else:
        return None
    return ScriptedRequest(
        api=api,
        provider=provider,
        path=request.path,
        query=dict(request.query),
        headers={k.lower(): v for k, v in request.headers.items()},
        body=body,
        stream=stream and not count,
        model=model,
        deployment=deployment or obj.get("deployment"),
        count_tokens=count,
        task=request.headers.get("x-task-id"),
        received_at=time.time(),
        raw_body=raw,
    )


async def handle(request: web.Request) -> web.StreamResponse:
    up = request.app[STATE]
    raw = await request.read()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
    req = parse_request(request, body, raw)
    if req is None:
        return web.json_response({"error": {"message": f"unknown path {request.path}"}}, status=404)
    up.requests.append(req)
    if req.count_tokens:
        return _json(wire.count_tokens_body(req, max(1, len(raw) // 4)), up.headers_for(req))
    charge = up.limiter.charge(req) if up.limiter is not None else None
    headers = up.headers_for(req, charge)
    if charge is not None and up.limiter is not None and not charge.admitted:
        return await render(request, req, charge.refusal(req, up.limiter.spec.stream_refusal), headers)
    reply = await up.responder(req)
    return await render(request, req, reply, headers)


def _json(obj: object, headers: dict[str, str], status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj), status=status, headers=headers, content_type="application/json"
    )


def error_body(req: ScriptedRequest, fault: HttpFault) -> dict:
    """The JSON body of an HTTP error answer in the request's API."""
    if req.provider == "gemini":
        return wire_gemini.gemini_error(fault.status, fault.retry_delay)
    if req.provider == "anthropic":
        kind = "rate_limit" if fault.status == 429 else "overloaded" if fault.status == 529 else "server"
        return wire_anthropic.anthropic_error(kind)
    return wire_openai.openai_error("rate_limit" if fault.status == 429 else "server", fault.retry_delay)


def _fault_headers(fault: HttpFault) -> dict[str, str]:
    pairs = {
        "retry-after": fault.retry_after,
        "x-ratelimit-reset-requests": fault.reset_requests,
        "x-ratelimit-reset-tokens": fault.reset_tokens,
        "retry-after-ms": str(fault.retry_after_ms) if fault.retry_after_ms is not None else None,
    }
    return {k: v for k, v in pairs.items() if v is not None}


async def render(
    request: web.Request, req: ScriptedRequest, reply: Reply, headers: dict[str, str]
) -> web.StreamResponse:
    if isinstance(reply, Hang):
        await asyncio.Event().wait()
    if isinstance(reply, RawReply):
        return await _raw(request, reply)
    if isinstance(reply, Held):
        return await _held(request, req, reply, headers)
    if isinstance(reply, HttpFault):
        body = reply.body if reply.body is not None else error_body(req, reply)
        return _json(body, {**headers, **_fault_headers(reply)}, reply.status)
    if isinstance(reply, StreamError) and not req.stream:
        status = {"rate_limit": 429, "overloaded": 529 if req.provider == "anthropic" else 503}.get(
            reply.kind, 500
        )
        return _json(error_body(req, HttpFault(status, retry_delay=reply.retry_delay)), headers, status)
    if isinstance(reply, CutStream) and not req.stream:
        request.transport.close()
        return web.Response()
    if not req.stream:
        return _json(BODIES[req.api](req, reply), headers)
    if isinstance(reply, StreamError):
        events, delay = EVENTS[req.api](req, reply.partial, reply), 0.0
    else:
        content = reply.reply if isinstance(reply, CutStream) else reply
        events, delay = EVENTS[req.api](req, content), content.event_delay_sec
    limit = reply.after_events if isinstance(reply, CutStream) else len(events)
    response = web.StreamResponse(
        headers={**headers, "content-type": "text/event-stream", "cache-control": "no-cache"}
    )
    await response.prepare(request)
    try:
        for event in events[:limit]:
            if delay:
                await asyncio.sleep(delay)
            await response.write(event)
    except ConnectionResetError:  # the client left mid-stream
        return response
    if limit < len(events):
        request.transport.close()  # a mid-stream cut: the client sees the body end without its terminator
        return response
    if isinstance(reply, TextReply) and reply.hold_open_sec:
        await asyncio.sleep(reply.hold_open_sec)
    await response.write_eof()
    return response


async def _raw(request: web.Request, reply: RawReply) -> web.StreamResponse:
    response = web.StreamResponse(status=reply.status, headers={"content-type": reply.content_type, **reply.headers})
    await response.prepare(request)
    for chunk in reply.chunks:
        await response.write(chunk)
    if reply.cut:
        request.transport.close()
        return response
    await response.write_eof()
    return response


async def _held(request: web.Request, req: ScriptedRequest, reply: Held, headers: dict[str, str]) -> web.StreamResponse:
    if not req.stream:
        reply.sent.set()
        await reply.release.wait()
        return _json(BODIES[req.api](req, reply.reply), headers)
    events = EVENTS[req.api](req, reply.reply)
    cut = max(0, len(events) - reply.keep_last)
    response = web.StreamResponse(headers={**headers, "content-type": "text/event-stream", "cache-control": "no-cache"})
    await response.prepare(request)
    try:
        for event in events[:cut]:
            await response.write(event)
        reply.sent.set()
        await reply.release.wait()
        for event in events[cut:]:
            await response.write(event)
    except ConnectionResetError:  # the client left
        return response
    await response.write_eof()
    return response


def build_app(responder: Responder | None = None, state: ScriptedUpstream | None = None) -> web.Application:
    """The scripted upstream app; pass `state` to share its request record and settings with a test."""
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[STATE] = state or ScriptedUpstream(responder)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def limiter_from(path: Path | None) -> RateLimiter | None:
    """The limiter of a `--rate-limits` file (None without one); SystemExit 2 naming the flag when it is not one."""
    if path is None:
        return None
    try:
        return RateLimiter(RateLimitSpec.model_validate_json(path.read_bytes()))
    except OSError as exc:
        problem = f"cannot read it ({exc.strerror})"
    except ValidationError as exc:
        problem = describe_error(exc)
    print(f"--rate-limits: {path}: {problem}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m hcu.scripted.upstream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate-limits", type=Path, help="per-deployment quotas to enforce (rate_limits.py)")
    args = parser.parse_args()
    app = build_app(state=ScriptedUpstream(limiter=limiter_from(args.rate_limits)))
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
