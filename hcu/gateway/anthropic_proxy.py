"""Anthropic Messages gateway.

    OSW_ANTHROPIC_UPSTREAM_BASE=https://<host> OSW_ANTHROPIC_UPSTREAM_TOKEN=<secret> \\
    python -m hcu.gateway.anthropic_proxy --host H --port P --out LOG --max-requests-per-task N
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import orjson

from hcu.gateway import cli
from hcu.gateway.credentials import StaticCredential
from hcu.gateway.descriptors import ANTHROPIC
from hcu.gateway.provider import Provider, Signal, StreamWatch, Verdict, as_dict, as_int, as_str, loads_or_none
from hcu.gateway.routes import route
from hcu.gateway.tokenlog import TokenUsage

RATE_LIMIT_TYPES = frozenset({"rate_limit_error", "overloaded_error"})
CONTENT_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})
ROUTES = (
    route("POST", "v1/messages"),
    route("POST", "v1/messages/count_tokens", "free"),
    route("GET", "v1/models", "free"),
    route("GET", "v1/models/{name}", "free"),
)
"""What Claude Code and the Anthropic SDK call; batches, files and admin endpoints are not served."""


def usage_of(raw: object) -> TokenUsage | None:
    """Anthropic reports uncached, cache-read and cache-write input separately; the log wants the sum."""
    u = as_dict(raw)
    if not u:
        return None
    cached, written = as_int(u.get("cache_read_input_tokens")), as_int(u.get("cache_creation_input_tokens"))
    return TokenUsage(
        input_tokens=as_int(u.get("input_tokens")) + cached + written,
        cached_input_tokens=cached,
        cache_write_input_tokens=written,
        output_tokens=as_int(u.get("output_tokens")),
    )


def error_signal(body: object) -> Signal:
    kind = as_dict(as_dict(body).get("error")).get("type")
    return Signal.RATE_LIMIT if kind in RATE_LIMIT_TYPES else Signal.ERROR


class AnthropicWatch(StreamWatch):
    def event(self, name: str | None, data: bytes) -> Signal:
        if name in CONTENT_EVENTS:
            return Signal.CONTENT
        if name == "message_start":
            message = as_dict(as_dict(loads_or_none(data)).get("message"))
            self.response_id = as_str(message.get("id"))
            self.usage = usage_of(message.get("usage"))
            return Signal.PREAMBLE
        if name == "ping":
            return Signal.PREAMBLE
        if name == "message_delta":
            output = as_int(as_dict(as_dict(loads_or_none(data)).get("usage")).get("output_tokens"))
            if self.usage is not None and output:
                self.usage.output_tokens = output
            return Signal.CONTENT
        if name == "message_stop":
            return self.end(Signal.SUCCESS)
        if name == "error":
            return self.end(error_signal(loads_or_none(data)))
        return Signal.OTHER


class AnthropicProvider(Provider):
    name = ANTHROPIC.name
    routes = ROUTES
    query_params = {"beta": None}
    rate_limit_statuses = frozenset({429, 529})

    def error_verdict(self, status: int, body: bytes) -> Verdict:
        if status in self.rate_limit_statuses:
            return Verdict(Signal.RATE_LIMIT)
        return Verdict(error_signal(loads_or_none(body)))

    def json_verdict(self, body: object) -> Verdict:
        obj = as_dict(body)
        if obj.get("type") == "error":
            return Verdict(error_signal(obj))
        signal = Signal.SUCCESS if obj.get("type") == "message" else Signal.ERROR
        return Verdict(signal, usage_of(obj.get("usage")), as_str(obj.get("id")))

    def watch(self, rest: str) -> StreamWatch:
        return AnthropicWatch()

    def error_body(self, rest: str, status: int, code: str, message: str) -> bytes:
        return orjson.dumps({"type": "error", "error": {"type": code, "message": message}})

    def error_event(self, rest: str, code: str, message: str) -> bytes:
        return b"event: error\ndata: " + self.error_body(rest, 0, code, message) + b"\n\n"


def main(argv: Sequence[str] | None = None) -> None:
    cli.serve_one_upstream(
        ANTHROPIC.module, argv, base_env=ANTHROPIC.base_env, default_base=ANTHROPIC.default_base,
        token_env=ANTHROPIC.token_env,
        provider=lambda token, scheme, path: AnthropicProvider(StaticCredential("x-api-key", token), scheme, path),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
