"""What the upstreams say about their own rate limits, per upstream, for `/healthz` (`upstream_limits`).

Every answer's headers carry the limit and what remains of it in the provider's current window, when the provider
sends them: OpenAI and Azure OpenAI `x-ratelimit-{limit,remaining}-{requests,tokens}` (Azure sends the remaining
ones), Anthropic `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining}` (its `tokens`
pair is the most restrictive of its token limits in effect). The newest answer's figures are kept with the Unix
time they were seen; an answer without any of them leaves the last ones standing. Gemini sends none.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel


class LimitSeen(BaseModel):
    """One kind of limit as an answer stated it (None: that header was absent)."""

    limit: int | None = None
    remaining: int | None = None


class ObservedLimits(BaseModel):
    """The rate-limit headers of an upstream's newest answer that had any."""

    requests: LimitSeen | None = None
    tokens: LimitSeen | None = None
    input_tokens: LimitSeen | None = None
    """Anthropic only."""
    output_tokens: LimitSeen | None = None
    """Anthropic only."""
    seen_at: float
    """Unix time of that answer."""


_OPENAI = {kind: (f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}") for kind in ("requests", "tokens")}
_ANTHROPIC = {kind.replace("-", "_"): (f"anthropic-ratelimit-{kind}-limit", f"anthropic-ratelimit-{kind}-remaining")
              for kind in ("requests", "tokens", "input-tokens", "output-tokens")}
HEADERS: dict[str, dict[str, tuple[str, str]]] = {"openai": _OPENAI, "anthropic": _ANTHROPIC, "gemini": {}}
"""Per provider: the kind of limit -> its (limit, remaining) header names."""
NOTES = {"gemini": "Gemini sends no rate-limit headers; nothing is observed (its 429s carry a RetryInfo delay)"}
"""Why a provider's upstreams report nothing."""


def _count(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def read_limits(provider: str, headers: Mapping[str, str], now: float) -> ObservedLimits | None:
    """The rate-limit figures in one answer's `headers` (None: it carries none)."""
    seen: dict[str, LimitSeen] = {}
    for kind, (limit_name, remaining_name) in HEADERS.get(provider, {}).items():
        limit, remaining = _count(headers.get(limit_name)), _count(headers.get(remaining_name))
        if limit is not None or remaining is not None:
            seen[kind] = LimitSeen(limit=limit, remaining=remaining)
    return ObservedLimits(**seen, seen_at=now) if seen else None
