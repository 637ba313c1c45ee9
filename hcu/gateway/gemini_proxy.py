"""Gemini (Generative Language API) gateway.

    OSW_GEMINI_UPSTREAM_TOKEN=<secret> [OSW_GEMINI_UPSTREAM_BASE=https://...] \\
    python -m hcu.gateway.gemini_proxy --host H --port P --out LOG --max-requests-per-task N
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import orjson

from hcu.gateway import cli
from hcu.gateway.backoff import parse_duration
from hcu.gateway.credentials import StaticCredential
from hcu.gateway.descriptors import GEMINI
from hcu.gateway.provider import Provider, Signal, StreamWatch, Verdict, as_dict, as_int, as_str, loads_or_none
from hcu.gateway.routes import route
from hcu.gateway.tokenlog import TokenUsage

RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_MODEL = re.compile(r"models/([^/:]+):")
ROUTES = (
    route("POST", "(v1|v1beta)/models/{name}:(generateContent|streamGenerateContent)"),
    route("POST", "(v1|v1beta)/models/{name}:countTokens", "free"),
    route("GET", "(v1|v1beta)/models", "free"),
    route("GET", "(v1|v1beta)/models/{name}", "free"),
)
"""The google-genai SDK posts under /v1, Gemini CLI under /v1beta; batch, file and tuning calls are not
served."""


def usage_of(raw: object) -> TokenUsage | None:
    u = as_dict(raw)
    if not u:
        return None
    thoughts = as_int(u.get("thoughtsTokenCount"))
    return TokenUsage(
        input_tokens=as_int(u.get("promptTokenCount")),
        cached_input_tokens=as_int(u.get("cachedContentTokenCount")),
        output_tokens=as_int(u.get("candidatesTokenCount")) + thoughts,
        reasoning_tokens=thoughts,
    )


def error_verdict_of(error: object, status: int = 0) -> Verdict:
    err = as_dict(error)
    if err.get("status") != "RESOURCE_EXHAUSTED" and status != 429 and err.get("code") != 429:
        return Verdict(Signal.ERROR)
    delays = [
        parse_duration(str(d.get("retryDelay", "")))
        for d in err.get("details") or []
        if isinstance(d, dict) and d.get("@type") == RETRY_INFO
    ]
    return Verdict(Signal.RATE_LIMIT, retry_after_sec=next((d for d in delays if d is not None), None))


class GeminiWatch(StreamWatch):
    """Gemini streams have no terminal event: success is a clean end after a candidate with a finishReason."""

    def event(self, name: str | None, data: bytes) -> Signal:
        obj = as_dict(loads_or_none(data))
        if "error" in obj:
            verdict = error_verdict_of(obj["error"])
            return self.end(verdict.signal, verdict.retry_after_sec)
        self.response_id = as_str(obj.get("responseId")) or self.response_id
        if "usageMetadata" in obj:
            self.usage = usage_of(obj["usageMetadata"])
        if any(isinstance(c, dict) and c.get("finishReason") for c in obj.get("candidates") or []):
            self.end(Signal.SUCCESS)
        return Signal.CONTENT if obj else Signal.OTHER


class GeminiProvider(Provider):
    name = GEMINI.name
    routes = ROUTES
    query_params = {"alt": frozenset({"sse"})}
    """`alt=sse` is what the SDK and Gemini CLI stream with; `alt=proto` answers are not JSON, so the gateway
    could not tell a success from a failure."""
    single_generation_fields = (("generationConfig", "candidateCount"),)

    def model_of(self, rest: str, body: object) -> str | None:
        match = _MODEL.search(rest)
        return match[1] if match else None

    def error_verdict(self, status: int, body: bytes) -> Verdict:
        return error_verdict_of(as_dict(loads_or_none(body)).get("error"), status)

    def json_verdict(self, body: object) -> Verdict:
        chunks = body if isinstance(body, list) else [body]  # streamGenerateContent without alt=sse
        last = as_dict(chunks[-1]) if chunks else {}
        if "error" in last:
            return error_verdict_of(last["error"])
        signal = Signal.SUCCESS if "candidates" in last or "totalTokens" in last else Signal.ERROR
        return Verdict(signal, usage_of(last.get("usageMetadata")), as_str(last.get("responseId")))

    def watch(self, rest: str) -> StreamWatch:
        return GeminiWatch()

    def error_body(self, rest: str, status: int, code: str, message: str) -> bytes:
        return orjson.dumps({"error": {"code": status, "message": message, "status": code}})

    def error_event(self, rest: str, code: str, message: str) -> bytes:
        return b"data: " + self.error_body(rest, 500, code, message) + b"\r\n\r\n"


def main(argv: Sequence[str] | None = None) -> None:
    cli.serve_one_upstream(
        GEMINI.module, argv, base_env=GEMINI.base_env, default_base=GEMINI.default_base, token_env=GEMINI.token_env,
        provider=lambda token, scheme, path: GeminiProvider(StaticCredential("x-goog-api-key", token), scheme, path),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
