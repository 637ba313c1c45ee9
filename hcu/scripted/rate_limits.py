"""Rate limits for the scripted upstream, enforced as Azure OpenAI enforces a deployment's quota, so the gateway
and the queue's admission can be tried against a quota without one.

- Each deployment has its own tokens-per-minute and requests-per-minute limits (`deployments`: by the name the
  request gives, Azure's path or body `model`; `*` for any deployment not listed and for requests naming none,
  each with a window of its own), over a sliding one-minute window.
- A generation is charged at arrival with an estimate: its prompt tokens (the characters of its text / 4, each
  image `image_tokens`) plus the output it reserves (`max_output_tokens`, `max_completion_tokens`, `max_tokens`,
  or Gemini's `generationConfig.maxOutputTokens`; without one `default_max_tokens`, where Azure reserves the
  model's whole maximum output). The charge is never corrected by what the answer used, so 429s come while actual
  use is under the limit, as on Azure. Token counting is free.
- A request that does not fit is refused and not charged: HTTP 429 with `retry-after` (whole seconds, rounded up)
  and `retry-after-ms` saying when enough of the window will have expired for it to fit (Anthropic: `retry-after`;
  Gemini: its RESOURCE_EXHAUSTED with a RetryInfo delay). With `stream_refusal` "event", a streamed request is
  answered 200 with a stream that ends in a rate-limit error event instead, as Azure's streams can end; its
  message says when to try again. A request larger than the limit alone is refused, a window long, every time.
- Every answer carries the deployment's limits and what remains of them (after its own charge):
  `x-ratelimit-{limit,remaining}-{tokens,requests}` on the OpenAI wire, `anthropic-ratelimit-{tokens,requests}-
  {limit,remaining}` on Anthropic's; Gemini's carry none, as Gemini's do.
- `time_factor` compresses time: the window lasts 60 s / time_factor, and retry hints are in those compressed
  seconds, so a test or a benchmark runs minutes of quota in seconds.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hcu.scripted.replies import HttpFault, Reply, ScriptedRequest, StreamError

WINDOW_SEC = 60.0
ANY_DEPLOYMENT = "*"
PerMinute = Annotated[int, Field(gt=0, strict=True)]


class DeploymentLimit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tpm: PerMinute | None = None
    rpm: PerMinute | None = None


class RateLimitSpec(BaseModel):
    """The scripted upstream's limits (`--rate-limits FILE` holds one as JSON)."""

    model_config = ConfigDict(extra="forbid")

    deployments: dict[str, DeploymentLimit] = Field(min_length=1)
    """Limits per deployment name; `*` for every other deployment and for requests naming none."""
    time_factor: float = Field(default=1.0, gt=0)
    """How many times faster than real time the window runs (60: a minute of quota per second)."""
    default_max_tokens: int = Field(default=4096, ge=0)
    """Output reserved for a request that sets no maximum."""
    image_tokens: int = Field(default=1000, ge=0)
    """What one image of a prompt is charged."""
    stream_refusal: Literal["http", "event"] = "http"
    """How a streamed request over the limit is refused: HTTP 429, or a 200 stream ending in an error event."""


MAX_OUTPUT_FIELDS = (("max_output_tokens",), ("max_completion_tokens",), ("max_tokens",),
                     ("generationConfig", "maxOutputTokens"))
LIMIT_HEADERS = {"openai": ("x-ratelimit-limit-{}", "x-ratelimit-remaining-{}"),
                 "anthropic": ("anthropic-ratelimit-{}-limit", "anthropic-ratelimit-{}-remaining")}
"""Per wire: the (limit, remaining) header names of a kind of limit."""
IMAGE_TYPE_KEYS = ("media_type", "mimeType", "mime_type")
"""Keys beside a base64 `data` field that make it an image (Anthropic's `source`, Gemini's `inlineData`)."""


def prompt_tokens(body: Any, image_tokens: int) -> int:
    """The estimate of a body's prompt: its strings' characters / 4, images at `image_tokens` each."""
    chars = images = 0
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value.startswith("data:image/"):
                images += 1
            else:
                chars += len(value)
        elif isinstance(value, dict):
            if isinstance(value.get("data"), str) and any(key in value for key in IMAGE_TYPE_KEYS):
                images += 1
                stack += [item for key, item in value.items() if key != "data"]
            else:
                stack += value.values()
        elif isinstance(value, list):
            stack += value
    return chars // 4 + images * image_tokens


def reserved_output(body: Any, default: int) -> int:
    """The output a request reserves: its own maximum, else `default`."""
    for path in MAX_OUTPUT_FIELDS:
        value = body
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if type(value) is int and value >= 0:
            return value
    return default


@dataclass(frozen=True)
class Charge:
    """What the limiter made of one request."""

    admitted: bool
    tokens: int
    """Its estimate."""
    retry_after_sec: float
    """Refused: when it would fit (compressed seconds)."""
    headers: dict[str, str]

    def refusal(self, req: ScriptedRequest, stream_refusal: str) -> Reply:
        """The answer to a refused request, in its provider's way."""
        seconds = max(self.retry_after_sec, 0.001)
        delay = f"{seconds:.3f}s"
        if req.stream and stream_refusal == "event":
            return StreamError("rate_limit", retry_delay=delay)
        if req.provider == "gemini":
            return HttpFault(429, retry_delay=delay)
        whole = str(math.ceil(seconds))
        if req.provider == "anthropic":
            return HttpFault(429, retry_after=whole)
        return HttpFault(429, retry_after=whole, retry_after_ms=math.ceil(seconds * 1000), retry_delay=delay)


class DeploymentWindow:
    """One deployment's sliding window of charges."""

    def __init__(self, limit: DeploymentLimit, window_sec: float) -> None:
        self.limit, self.window_sec = limit, window_sec
        self.charges: deque[tuple[float, int]] = deque()
        self.tokens = 0

    def _expire(self, now: float) -> None:
        while self.charges and self.charges[0][0] <= now - self.window_sec:
            self.tokens -= self.charges.popleft()[1]

    def _fits(self, tokens: int, used: int, requests: int) -> bool:
        return ((self.limit.tpm is None or used + tokens <= self.limit.tpm)
                and (self.limit.rpm is None or requests + 1 <= self.limit.rpm))

    def charge(self, tokens: int, now: float) -> tuple[bool, float]:
        """Charge `tokens` now if they fit; else (False, seconds until they would)."""
        self._expire(now)
        if self._fits(tokens, self.tokens, len(self.charges)):
            self.charges.append((now, tokens))
            self.tokens += tokens
            return True, 0.0
        used, requests = self.tokens, len(self.charges)
        for at, charged in self.charges:  # the oldest charges leave the window first
            used, requests = used - charged, requests - 1
            if self._fits(tokens, used, requests):
                return False, at + self.window_sec - now
        return False, self.window_sec  # larger than the limit itself: it never fits

    def remaining(self, now: float) -> tuple[int | None, int | None]:
        """Tokens and requests left in the window now (None: no such limit)."""
        self._expire(now)
        return (None if self.limit.tpm is None else max(0, self.limit.tpm - self.tokens),
                None if self.limit.rpm is None else max(0, self.limit.rpm - len(self.charges)))


class RateLimiter:
    """The scripted upstream's limits; `clock` gives monotonic seconds (tests move their own)."""

    def __init__(self, spec: RateLimitSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec, self.clock = spec, clock
        self.windows: dict[str, DeploymentWindow] = {}
        self.refusals: Counter[str] = Counter()
        """Refused requests per deployment ("" for none)."""

    def _window(self, deployment: str | None) -> DeploymentWindow | None:
        name = deployment or ""
        if name not in self.windows:
            limit = self.spec.deployments.get(name) or self.spec.deployments.get(ANY_DEPLOYMENT)
            if limit is None:
                return None
            self.windows[name] = DeploymentWindow(limit, WINDOW_SEC / self.spec.time_factor)
        return self.windows[name]

    def charge(self, req: ScriptedRequest) -> Charge:
        """Charge a generation request at arrival, or refuse it."""
        window = self._window(req.deployment)
        tokens = prompt_tokens(req.body, self.spec.image_tokens) + reserved_output(req.body,
                                                                                   self.spec.default_max_tokens)
        if window is None:
            return Charge(True, tokens, 0.0, {})
        now = self.clock()
        admitted, wait = window.charge(tokens, now)
        if not admitted:
            self.refusals[req.deployment or ""] += 1
        return Charge(admitted, tokens, wait, self._headers(req, window, now))

    def headers(self, req: ScriptedRequest) -> dict[str, str]:
        """The limit headers for a request that is not charged (token counting)."""
        window = self._window(req.deployment)
        return {} if window is None else self._headers(req, window, self.clock())

    @staticmethod
    def _headers(req: ScriptedRequest, window: DeploymentWindow, now: float) -> dict[str, str]:
        names = LIMIT_HEADERS.get(req.provider)
        if names is None:
            return {}  # Gemini sends no rate-limit headers
        tokens, requests = window.remaining(now)
        headers = {}
        for kind, limit, left in (("tokens", window.limit.tpm, tokens), ("requests", window.limit.rpm, requests)):
            if limit is not None:
                headers[names[0].format(kind)], headers[names[1].format(kind)] = str(limit), str(left)
        return headers
