"""The admission's signal as the run's gateways report it: `GET /healthz?waits=<run id>.` from the gateway's
host gives each of the run's scopes' cumulative rate-limit waits (`rate_limit_waits`) and what each upstream's
newest answer said of its rate limits (`upstream_limits`). One gateway on one host, or one per Ray node (each
node's agent reads its own and the head merges them): a scope lives on one gateway; an upstream seen by several
counts at its freshest.

An upstream's headroom is the smallest share left of its limits in its newest answer (tokens, requests, and
Anthropic's input and output tokens, where stated; a limit the header leaves out is the config's `quota` entry
for that upstream, when it has one), if that answer is recent; the run's headroom is the largest over its
upstreams, since the gateway starts new attempts on the upstream with the most remaining tokens.
"""

from __future__ import annotations

import requests
from pydantic import BaseModel, ConfigDict, ValidationError

from hcu.gateway.budget import ScopeWaits
from hcu.gateway.observed_limits import ObservedLimits
from hcu.osworld.quota.admission import Reading
from hcu.osworld.quota.limits import QuotaLimit

TIMEOUT_SEC = 2.0
QUOTA_OF = {"tokens": "tpm", "requests": "rpm"}
"""The quota entry that stands for a limit the headers leave out."""


class GatewayReport(BaseModel):
    """The part of one gateway's `/healthz` the admission reads."""

    model_config = ConfigDict(extra="ignore")

    rate_limit_waits: dict[str, ScopeWaits] = {}
    upstream_limits: dict[str, ObservedLimits | None] = {}


def fetch_report(gateway_url: str, scope_prefix: str, timeout_sec: float = TIMEOUT_SEC) -> GatewayReport | None:
    """The gateway's report on the scopes starting with `scope_prefix` (None: it did not answer, or not with
    its details: only its own host is told them)."""
    try:
        resp = requests.get(gateway_url.rstrip("/") + "/healthz", params={"waits": scope_prefix},
                            timeout=timeout_sec)
        resp.raise_for_status()
        body = resp.json()
    except (requests.RequestException, ValueError):
        return None
    if not isinstance(body, dict) or "rate_limit_waits" not in body:
        return None
    try:
        return GatewayReport.model_validate(body)
    except ValidationError:
        return None


def headroom(seen: ObservedLimits, quota: QuotaLimit | None) -> float | None:
    """The smallest share left of the limits one answer stated (None: it stated no share)."""
    shares = []
    for kind in ("requests", "tokens", "input_tokens", "output_tokens"):
        figure = getattr(seen, kind)
        if figure is None or figure.remaining is None:
            continue
        limit = figure.limit or (getattr(quota, QUOTA_OF[kind]) if quota is not None and kind in QUOTA_OF else None)
        if limit:
            shares.append(min(1.0, figure.remaining / limit))
    return min(shares, default=None)


def freshest_limits(reports: list[GatewayReport]) -> dict[str, ObservedLimits]:
    """Each upstream's newest answer that stated its rate limits, over the gateways that saw it."""
    freshest: dict[str, ObservedLimits] = {}
    for report in reports:
        for label, seen in report.upstream_limits.items():
            if seen is not None and (label not in freshest or seen.seen_at > freshest[label].seen_at):
                freshest[label] = seen
    return freshest


def reading_of(reports: list[GatewayReport], now: float, max_age_sec: float,
               quota: dict[str, QuotaLimit] | None = None) -> Reading:
    """One reading from the gateways' reports at Unix time `now`: every scope's waits, and the run's headroom
    from upstream answers seen within `max_age_sec`."""
    waits: dict[str, float] = {}
    for report in reports:
        for scope, counted in report.rate_limit_waits.items():
            waits[scope] = max(waits.get(scope, 0.0), counted.wait_sec)
    freshest = freshest_limits(reports)
    shares = [share for label, seen in freshest.items() if now - seen.seen_at <= max_age_sec
              and (share := headroom(seen, (quota or {}).get(label))) is not None]
    return Reading(waits, max(shares, default=None))
