"""The quota the upstreams state of themselves, for a run whose config gives none (`quota`): the limits in each
upstream's newest answer that stated any, as the run's gateways report them (`/healthz` `upstream_limits`:
OpenAI's `x-ratelimit-limit-{tokens,requests}`, Anthropic's `anthropic-ratelimit-{tokens,requests}-limit`, its
`tokens` pair being the tightest of its token limits). An upstream whose answers stated no limit is not counted:
Azure's answers state only what remains, Gemini's nothing; the forecast then says the quota is unknown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from hcu.osworld.quota.forecast import Campaign
from hcu.osworld.quota.gateway_reading import GatewayReport, freshest_limits
from hcu.osworld.quota.limits import QuotaLimit

NOT_STATED = ("no upstream has stated its limits yet (they do in their answers: OpenAI's and Anthropic's; Azure's "
              "state only what remains, Gemini's nothing)")


@dataclass(frozen=True)
class ObservedQuota:
    """Limits the upstreams stated, by the gateway's label for each."""

    quota: dict[str, QuotaLimit]
    seen_at: float
    """Unix time of the newest answer counted."""
    by: str
    """Whose reports: the gateway (or gateways) that saw the answers."""

    def describe(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.seen_at))
        return f"observed by {self.by}: the limits the upstreams' answers stated, newest seen {stamp}"


def observed_quota(reports: list[GatewayReport], by: str) -> ObservedQuota | None:
    """The quota the reports' upstreams stated (None: no upstream stated a limit)."""
    quota: dict[str, QuotaLimit] = {}
    seen_at = 0.0
    for label, seen in freshest_limits(reports).items():
        tpm = seen.tokens.limit if seen.tokens is not None else None
        rpm = seen.requests.limit if seen.requests is not None else None
        if tpm or rpm:
            quota[label] = QuotaLimit(tpm=tpm or None, rpm=rpm or None)
            seen_at = max(seen_at, seen.seen_at)
    return ObservedQuota(quota, seen_at, by) if quota else None


def with_observed(base: Campaign, observed: ObservedQuota | None, unobserved: str = NOT_STATED) -> Campaign:
    """The campaign on the quota its upstreams stated (for a config without one); `unobserved` says why there is
    none."""
    if observed is None:
        return replace(base, quota=None, quota_source=unobserved, quota_observed=False)
    return replace(base, quota=observed.quota, quota_source=observed.describe(), quota_observed=True)
