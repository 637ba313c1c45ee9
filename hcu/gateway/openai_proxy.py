"""OpenAI / Azure OpenAI gateway: Responses and Chat Completions.

    [OSW_OPENAI_UPSTREAM_TOKEN=<secret>] python -m hcu.gateway.openai_proxy --host H --ports P[,P2...]
        --upstreams U[,U@deployment,...] [--upstream-kind azure|openai] [--upstream-scheme https|http]
        [--pin-resources R1,R2] --out LOG --max-requests-per-task N [--rate-limit-max-wait SEC] ...

The upstream token comes from OSW_OPENAI_UPSTREAM_TOKEN (`--upstream-token` still works, but every local user
can read a command line). Azure without a token uses Entra ID (`az login`, managed identity).

Azure is called as its v1 API documents it: `https://<host>/openai/v1/<responses|chat/completions>`; with
`host@deployment`, the deployment's name goes into the body's `model` (the token log keeps both: `model` is
what the client asked for, `deployment` what served it).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

import orjson

from hcu.gateway import cli
from hcu.gateway.body_json import field
from hcu.gateway.credentials import AzureTokenCredential, Credential, StaticCredential
from hcu.gateway.descriptors import OPENAI
from hcu.gateway.options import OpenAIOptions
from hcu.gateway.pool import Upstream, parse_upstreams
from hcu.gateway.provider import Provider, Signal, StreamWatch, Verdict, as_dict, as_int, as_str, loads_or_none
from hcu.gateway.routes import route
from hcu.gateway.tokenlog import TokenUsage

TOKEN_ENV = OPENAI.token_env
ROUTES = (
    route("POST", "v1/responses"),
    route("POST", "v1/chat/completions"),
    route("POST", "v1/responses/input_tokens", "free"),
    route("GET", "v1/models", "free"),
    route("GET", "v1/models/{name}", "free"),
)
"""What Codex (Responses) and Grok Build (Chat Completions) call; `GET /v1/responses/{id}` is not needed
(Codex streams with `store: false`), so stored responses cannot be fetched for free."""
RATE_LIMIT_CODES = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "too_many_requests",
        "429",
        "RateLimitReached",
        "insufficient_quota_temporary",
    }
)
PERMANENT_429_CODES = frozenset({"insufficient_quota"})
"""A 429 that waiting does not cure (billing): forwarded at once."""
PREAMBLE_EVENTS = frozenset({"response.created", "response.in_progress", "response.queued"})
SUCCESS_EVENTS = frozenset({"response.completed", "response.incomplete"})
PARSED_EVENTS = PREAMBLE_EVENTS | SUCCESS_EVENTS | {"error", "response.failed"}
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)", re.IGNORECASE)


def usage_of(raw: object) -> TokenUsage | None:
    """Responses (`input_tokens`...) or Chat Completions (`prompt_tokens`...) usage."""
    u = as_dict(raw)
    if not u:
        return None
    if "prompt_tokens" in u:
        return TokenUsage(
            input_tokens=as_int(u.get("prompt_tokens")),
            cached_input_tokens=as_int(as_dict(u.get("prompt_tokens_details")).get("cached_tokens")),
            output_tokens=as_int(u.get("completion_tokens")),
            reasoning_tokens=as_int(as_dict(u.get("completion_tokens_details")).get("reasoning_tokens")),
        )
    return TokenUsage(
        input_tokens=as_int(u.get("input_tokens")),
        cached_input_tokens=as_int(as_dict(u.get("input_tokens_details")).get("cached_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        reasoning_tokens=as_int(as_dict(u.get("output_tokens_details")).get("reasoning_tokens")),
    )


def error_signal(error: object) -> tuple[Signal, float | None]:
    err = as_dict(error)
    code = str(err.get("code") or err.get("type") or "")
    if code not in RATE_LIMIT_CODES:
        return Signal.ERROR, None
    hint = _TRY_AGAIN.search(str(err.get("message") or ""))
    return Signal.RATE_LIMIT, (float(hint[1]) / (1000 if hint[2] == "ms" else 1)) if hint else None


def _says_something(choice: object) -> bool:
    """A chat chunk choice with output or a finish; the role-only opener (and Azure's filter-results chunk
    without choices) is held back like a Responses preamble, so an error right after it stays retryable."""
    c = as_dict(choice)
    delta = as_dict(c.get("delta"))
    return bool(
        c.get("finish_reason")
        or delta.get("content")
        or delta.get("tool_calls")
        or delta.get("refusal")
        or delta.get("reasoning_content")
        or delta.get("function_call")
    )


class OpenAIWatch(StreamWatch):
    def event(self, name: str | None, data: bytes) -> Signal:
        if name is None or name == "message":
            if data == b"[DONE]":
                return self.end(Signal.SUCCESS)
            obj = as_dict(loads_or_none(data))
            name = obj.get("type")
            if name is None:
                return self._chat_chunk(obj)
        elif name not in PARSED_EVENTS:
            return Signal.CONTENT  # deltas: forwarded without parsing
        else:
            obj = as_dict(loads_or_none(data))
        return self._responses_event(name, obj)

    def _responses_event(self, name: str, obj: dict) -> Signal:
        response = as_dict(obj.get("response"))
        self.response_id = as_str(response.get("id")) or self.response_id
        if name in PREAMBLE_EVENTS:
            return Signal.PREAMBLE
        if name in SUCCESS_EVENTS:
            if self.verdict is None:
                self.usage = usage_of(response.get("usage"))
            return self.end(Signal.SUCCESS)
        if name == "response.failed":
            return self._error(response.get("error"))
        if name == "error":
            return self._error(obj.get("error") or obj)
        return Signal.CONTENT

    def _chat_chunk(self, obj: dict) -> Signal:
        if obj.get("error"):
            return self._error(obj["error"])
        self.response_id = as_str(obj.get("id")) or self.response_id
        if obj.get("usage"):
            self.usage = usage_of(obj["usage"])
            return Signal.CONTENT
        return Signal.CONTENT if any(map(_says_something, obj.get("choices") or [])) else Signal.PREAMBLE

    def _error(self, error: object) -> Signal:
        return self.end(*error_signal(error))


class OpenAIProvider(Provider):
    name = OPENAI.name
    routes = ROUTES
    query_params = {"api-version": None}
    refused_body_flags = ("background",)
    single_generation_fields = (("n",),)

    def __init__(self, credential: Credential, scheme: str = "https", kind: str = "azure") -> None:
        super().__init__(credential, scheme)
        self.kind = kind

    def upstream_url(self, upstream: Upstream, rest: str, query: str) -> str:
        if self.kind == "azure":
            rest = f"openai/{rest}"  # every route starts with v1/
        return super().upstream_url(upstream, rest, query)

    def upstream_model(self, upstream: Upstream) -> str | None:
        return upstream.deployment if self.kind == "azure" else None

    def continues_state(self, body: object) -> bool:
        return bool(field(body, "previous_response_id") or field(body, "conversation"))

    def error_verdict(self, status: int, body: bytes) -> Verdict:
        error = as_dict(as_dict(loads_or_none(body)).get("error"))
        if status != 429 or error.get("code") in PERMANENT_429_CODES:
            return Verdict(Signal.ERROR)
        return Verdict(Signal.RATE_LIMIT, retry_after_sec=error_signal(error)[1])

    def json_verdict(self, body: object) -> Verdict:
        obj = as_dict(body)
        usage, rid = usage_of(obj.get("usage")), as_str(obj.get("id"))
        if obj.get("error"):
            signal, hint = error_signal(obj["error"])
            return Verdict(signal, usage, rid, hint)
        if obj.get("object") == "response" and obj.get("status") not in ("completed", "incomplete"):
            return Verdict(Signal.ERROR, usage, rid)
        return Verdict(Signal.SUCCESS if obj else Signal.ERROR, usage, rid)

    def watch(self, rest: str) -> StreamWatch:
        return OpenAIWatch()

    def error_body(self, rest: str, status: int, code: str, message: str) -> bytes:
        return orjson.dumps({"error": {"message": message, "type": code, "code": code, "param": None}})

    def error_event(self, rest: str, code: str, message: str) -> bytes:
        error = {"message": message, "type": code, "code": code, "param": None}
        if "chat/completions" in rest:
            return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
        event = {"type": "error", "code": code, "message": message, "param": None, "error": error}
        return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


def main(argv: Sequence[str] | None = None) -> None:
    shell = cli.Shell(OPENAI.module, OpenAIOptions)
    opts = shell.parse(argv)
    token = opts.upstream_token or os.environ.get(TOKEN_ENV, "").strip()
    if opts.upstream_kind == "openai" and not token:
        shell.fail(f"{TOKEN_ENV}: environment variable is missing or empty (required with --upstream-kind openai)")
    credential: Credential
    if token:
        header = "api-key" if opts.upstream_kind == "azure" else "Authorization"
        credential = StaticCredential(header, token if header == "api-key" else f"Bearer {token}")
    else:
        credential = AzureTokenCredential()
    warnings = [f"--upstream-token: the token on the command line is visible to every local user (ps); "
                f"set {TOKEN_ENV} instead"] if opts.upstream_token else []
    provider = OpenAIProvider(credential, opts.upstream_scheme, opts.upstream_kind)
    shell.run(opts, provider, parse_upstreams(opts.upstreams), opts.pins(), warnings)


if __name__ == "__main__":
    main(sys.argv[1:])
