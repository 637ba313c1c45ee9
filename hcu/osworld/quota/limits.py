"""The quota a campaign runs on (`quota` in the run config) and how many attempts it serves at once.

A key is a provider (`openai`, `anthropic`, `gemini`: an organisation's limit for the run's model), an upstream
resource (`host[:port]`, as the gateway's `--upstreams` names it) or one deployment on it
(`host[:port]@deployment`); its value `{"tpm": ..., "rpm": ...}` gives tokens and requests per minute (either may
be absent). What the quota serves, per limit kind:

- a resource serves the smaller of its own entry and the sum of its deployments' entries (when every deployment
  the gateway lists on it has one); a resource with neither is not counted, and the forecast says so;
- the run's upstreams together serve the sum over their resources (the gateway spreads new attempts over them);
- a provider entry caps that sum (or stands alone when no upstream has an entry).

How many attempts that serves at once: the quota's tokens per minute over one running attempt's 90th-percentile
token rate, and its requests per minute over its 90th-percentile call rate; the smaller binds. Sizing to the 90th
percentile leaves room for the attempts that run hot; a quota sized to the median would see 429s half the time.
The whole number is at least 1: a quota that serves less than one attempt (exact 0.9) still serves one, slowed;
beside it the share of its agent phase an attempt then waits, as a fluid quota shares itself: n attempts that each
ask r of a quota serving c < n*r get c/n each, so each waits 1 - c/(n*r) of its time (0.9 at 1: a tenth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from hcu.flags import Settings
from hcu.gateway.descriptors import PROVIDERS as PROVIDER_DESCRIPTORS
from hcu.gateway.pool import UpstreamSpecError, parse_upstreams

PROVIDERS: tuple[str, ...] = tuple(PROVIDER_DESCRIPTORS)
Metric = Literal["tpm", "rpm"]
PerMinute = Annotated[int, Field(gt=0, strict=True)]


class QuotaLimit(Settings):
    """One quota entry: tokens and requests per minute (either may be absent, not both)."""

    tpm: PerMinute | None = None
    """Tokens per minute, as the provider counts them (see the forecast's `counted_tokens`)."""
    rpm: PerMinute | None = None
    """Requests per minute."""

    @model_validator(mode="after")
    def _a_limit(self) -> QuotaLimit:
        if self.tpm is None and self.rpm is None:
            raise ValueError("expected tpm, rpm or both (positive integers)")
        return self


def key_problem(key: str) -> str | None:
    """Why `key` cannot name a quota (None: a provider, or an upstream label as the gateway writes them)."""
    if key in PROVIDERS:
        return None
    try:
        parse_upstreams(key)
    except UpstreamSpecError:
        return (f"expected a provider ({', '.join(PROVIDERS)}) or a gateway upstream, host[:port] or "
                "host[:port]@deployment")
    return None if "," not in key else "one upstream per key"


def upstreams_in_args(args: list[str]) -> list[str] | None:
    """The upstream labels a gateway command line's `--upstreams` gives (None: it has none, or a malformed one,
    which the gateway itself refuses)."""
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if flag != "--upstreams":
            continue
        value = value if equals else (args[index + 1] if index + 1 < len(args) else "")
        try:
            return [upstream.label for upstream in parse_upstreams(value)]
        except UpstreamSpecError:
            return None
    return None


def unmatched_key(quota: dict[str, QuotaLimit], provider: str, upstreams: list[str] | None) -> str | None:
    """The one-line error for the first quota key that names neither the run's provider nor one of the gateway's
    upstreams (a resource matches the deployments on it); None when all match. With the upstreams unknown only
    provider keys are checked."""
    for key in quota:
        if key == provider:
            continue
        if key in PROVIDERS or (upstreams is not None and not any(
                key == label or key == label.partition("@")[0] for label in upstreams)):
            listed = ", ".join(upstreams) if upstreams is not None else "unknown"
            return (f"quota.{key}: no gateway upstream or provider of this run is named {key} "
                    f"(provider: {provider}; upstreams: {listed})")
    return None


@dataclass(frozen=True)
class Capacity:
    """What the quota serves of one limit kind, and whose entries that is."""

    per_minute: int
    of: str
    """e.g. "tpm of openai", "tpm of host@a + host@b"."""


def capacity(quota: dict[str, QuotaLimit], provider: str, upstreams: list[str] | None,
             metric: Metric) -> tuple[Capacity | None, list[str]]:
    """The run's capacity of `metric` and notes on upstreams it could not count. With the gateway's upstreams
    unknown, the quota's own upstream keys stand for them."""
    labels = upstreams if upstreams is not None else [key for key in quota if key not in PROVIDERS]
    resources: dict[str, list[str]] = {}
    for label in labels:
        resources.setdefault(label.partition("@")[0], []).append(label)
    parts: list[tuple[int, list[str]]] = []
    uncounted: list[str] = []
    for resource, members in resources.items():
        options = []
        if (own := _limit(quota, resource, metric)) is not None:
            options.append((own, [resource]))
        deployments = [label for label in members if label != resource]
        limits = [_limit(quota, label, metric) for label in deployments]
        if deployments and all(limit is not None for limit in limits):
            options.append((sum(limit or 0 for limit in limits), deployments))
        if options:
            parts.append(min(options, key=lambda option: option[0]))
        else:
            uncounted.append(resource)
    provider_limit = _limit(quota, provider, metric)
    upstream_total = sum(limit for limit, _ in parts)
    notes = [f"{metric}: no quota for upstream {', '.join(uncounted)}, not counted"] if parts and uncounted else []
    if parts and (provider_limit is None or upstream_total < provider_limit):
        names = " + ".join(name for _, members in parts for name in members)
        return Capacity(upstream_total, f"{metric} of {names}"), notes
    if provider_limit is not None:
        return Capacity(provider_limit, f"{metric} of {provider}"), notes
    return None, notes


def _limit(quota: dict[str, QuotaLimit], key: str, metric: Metric) -> int | None:
    entry = quota.get(key)
    return None if entry is None else getattr(entry, metric)


@dataclass(frozen=True)
class SafeConcurrency:
    """How many attempts the quota serves at once, and which limit binds."""

    attempts: int
    """Whole attempts, at least 1 (with `exact` below 1, one attempt alone outruns the quota and is slowed)."""
    exact: float
    binding: str
    wait_share: float
    """The share of its agent phase an attempt waits on rate limits with `attempts` running at their
    90th-percentile rate: 1 - exact / attempts, 0 when they fit."""


def safe_concurrency(quota: dict[str, QuotaLimit], provider: str, upstreams: list[str] | None,
                     tokens_per_minute_p90: float | None,
                     calls_per_minute_p90: float | None) -> tuple[SafeConcurrency | None, list[str]]:
    """The quota's capacity over one attempt's 90th-percentile rates, the smaller of tokens and requests (None
    when no limit and rate pair is known), with the notes of `capacity`."""
    found: list[SafeConcurrency] = []
    notes: list[str] = []
    for metric, rate in (("tpm", tokens_per_minute_p90), ("rpm", calls_per_minute_p90)):
        cap, said = capacity(quota, provider, upstreams, metric)  # type: ignore[arg-type]
        notes += said
        if cap is not None and rate:
            exact = cap.per_minute / rate
            whole = max(1, math.floor(exact))
            found.append(SafeConcurrency(whole, round(exact, 3), cap.of, round(max(0.0, 1 - exact / whole), 3)))
    return min(found, key=lambda safe: safe.exact, default=None), notes
