"""The provider seam: everything the core needs to know that differs between OpenAI, Anthropic and Gemini.

A provider lists the routes its CLIs need (which are generations, which are free) and the query parameters
of its API, maps a client path to an upstream URL, supplies the real credential, and classifies what comes
back (a JSON body, an error body, each stream event) as a `Signal`. It never decides what to do about it:
refusing, waiting, retrying, counting and logging live in the core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import orjson

from hcu.gateway.credentials import Credential
from hcu.gateway.pool import Upstream
from hcu.gateway.routes import Route
from hcu.gateway.tokenlog import TokenUsage


class Signal(enum.Enum):
    PREAMBLE = "preamble"
    """Stream opening that says nothing yet (`response.created`, `message_start`, ping): held back."""
    CONTENT = "content"
    SUCCESS = "success"
    """A success terminal event, or a successful JSON body."""
    RATE_LIMIT = "rate_limit"
    ERROR = "error"
    OTHER = "other"
    """Neither content nor a verdict (keep-alives, unknown events)."""


@dataclass
class Verdict:
    """What a JSON body or an error body says."""

    signal: Signal
    usage: TokenUsage | None = None
    response_id: str | None = None
    retry_after_sec: float | None = None


def loads_or_none(data: bytes) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def as_dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def as_int(value: object) -> int:
    return value if isinstance(value, int) else 0


class StreamWatch:
    """Classifies the events of one upstream stream and collects usage and ids on the way."""

    def __init__(self) -> None:
        self.usage: TokenUsage | None = None
        self.response_id: str | None = None
        self.retry_after_sec: float | None = None
        self.succeeded = False
        self.errored = False

    def event(self, name: str | None, data: bytes) -> Signal:
        raise NotImplementedError

    def finish(self) -> bool:
        """At the end of the stream: did it end in success?"""
        return self.succeeded and not self.errored


class Provider:
    """Base provider; subclasses override what differs."""

    name = ""
    routes: tuple[Route, ...] = ()
    """The allow-list: (method, path pattern, kind) of every call the gateway forwards."""
    query_params: frozenset[str] = frozenset()
    """Query parameters of the API that pass through; any other (`key=`, `access_token=`...) is dropped."""
    refused_body_flags: tuple[str, ...] = ()
    """Top-level body fields that, when true, ask for execution the budget cannot follow (`background`)."""
    rate_limit_statuses: frozenset[int] = frozenset({429})

    def __init__(self, credential: Credential, scheme: str = "https", base_path: str = "") -> None:
        self.credential = credential
        self.scheme = scheme
        self.base_path = base_path.rstrip("/")
        """Path prefix of the upstream API (an upstream base URL may carry one)."""

    def upstream_url(self, upstream: Upstream, rest: str, query: str) -> str:
        """URL for the client's `/<rest>?<query>` (rest has no leading slash; query has no key)."""
        url = f"{self.scheme}://{upstream.resource}{self.base_path}/{rest}"
        return f"{url}?{query}" if query else url

    def upstream_model(self, upstream: Upstream) -> str | None:
        """The `model` the body must carry for `upstream` (an Azure v1 deployment's name); None to send the
        client's body as it came."""
        return None

    def model_of(self, rest: str, body: object) -> str | None:
        model = as_dict(body).get("model")
        return model if isinstance(model, str) else None

    def continues_state(self, body: object) -> bool:
        """Whether the request continues server-side state on the upstream that produced it."""
        return False

    def error_verdict(self, status: int, body: bytes) -> Verdict:
        """A non-2xx answer: rate limit (waited out) or error (forwarded)."""
        signal = Signal.RATE_LIMIT if status in self.rate_limit_statuses else Signal.ERROR
        return Verdict(signal)

    def json_verdict(self, body: object) -> Verdict:
        raise NotImplementedError

    def watch(self, rest: str) -> StreamWatch:
        raise NotImplementedError

    def error_body(self, rest: str, status: int, code: str, message: str) -> bytes:
        raise NotImplementedError

    def error_event(self, rest: str, code: str, message: str) -> bytes:
        """An SSE error event that ends a stream the client already receives."""
        raise NotImplementedError
