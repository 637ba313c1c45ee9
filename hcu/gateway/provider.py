"""The provider seam: everything the core needs to know that differs between OpenAI, Anthropic and Gemini.

A provider lists the routes its CLIs need (which are generations, which are free) and the query parameters
of its API, maps a client path to an upstream URL, supplies the real credential, and classifies what comes
back (a JSON body, an error body, each stream event) as a `Signal`. It never decides what to do about it:
refusing, waiting, retrying, counting and logging live in the core.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from hcu.gateway.body_json import field
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


MAX_COUNT = 1 << 62
"""Token counts past this are not counts (and would not fit the log's integers)."""


def as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT else 0


def as_str(value: object) -> str | None:
    """An id from an upstream's answer: a string, or nothing."""
    return value if isinstance(value, str) else None


class StreamWatch:
    """Classifies the events of one upstream stream and collects usage and ids on the way."""

    def __init__(self) -> None:
        self.usage: TokenUsage | None = None
        self.response_id: str | None = None
        self.retry_after_sec: float | None = None
        self.verdict: Signal | None = None
        """The stream's first terminal event: SUCCESS, ERROR or RATE_LIMIT. Nothing after it changes the
        verdict: a completed answer followed by a late error event is a success."""

    def event(self, name: str | None, data: bytes) -> Signal:
        raise NotImplementedError

    def end(self, signal: Signal, retry_after_sec: float | None = None) -> Signal:
        """Record a terminal event (only the first counts); returns `signal` for the caller to pass on."""
        if self.verdict is None:
            self.verdict, self.retry_after_sec = signal, retry_after_sec
        return signal

    @property
    def succeeded(self) -> bool:
        return self.verdict is Signal.SUCCESS


class Provider:
    """Base provider; subclasses override what differs."""

    name = ""
    routes: tuple[Route, ...] = ()
    """The allow-list: (method, path pattern, kind) of every call the gateway forwards."""
    query_params: Mapping[str, frozenset[str] | None] = {}
    """Query parameters of the API that pass through, each with the values it may take (None: any); any other
    parameter (`key=`, `access_token=`...) is dropped."""
    refused_body_flags: tuple[str, ...] = ()
    """Top-level body fields that, unless false or absent, ask for execution the budget cannot follow
    (`background`)."""
    single_generation_fields: tuple[tuple[str, ...], ...] = ()
    """Paths of body fields that ask for several generations in one call (`n`, `candidateCount`): anything but
    absent or 1 is refused, since the budget counts calls."""
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
        return as_str(field(body, "model"))

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
