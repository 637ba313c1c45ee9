"""The campaign forecast: what the attempts still to run will take in tokens, model calls, time and money, how
many of them the quota serves at once, and which limit binds.

From a sample of attempt profiles (profile.py) and the campaign (how many attempts, the quota, this host's memory,
`max_active_tasks`): one attempt's figures as median and 90th percentile, and each total over the attempts to run
as a 90% prediction interval (stats.py). The wall time is the largest of its bounds (wall.py): the attempts' length
without their rate-limit waits at the number admitted at once, and the tokens and model calls over the quota's
rates (the smaller of what it states and what it delivered to a run it throttled: delivered.py). Admitted at once:
the smallest of `max_active_tasks` (under `"auto"` its ceiling, and the quota's safe concurrency, exact, which the
admission starts at and then holds about: bench_quota.py measures it a little above) and, with the local executor,
what this host's memory admits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pydantic import BaseModel

from hcu.osworld.quota.delivered import Delivered, per_minute
from hcu.osworld.quota.limits import Capacity, QuotaLimit, capacity, safe_concurrency
from hcu.osworld.quota.profile import COUNTED_TOKENS, AttemptProfile, Sample
from hcu.osworld.quota.stats import Range, Spread, spread, sum_range
from hcu.osworld.quota.wall import WallBound, wall_bounds, wall_time

DOMAIN_MIN_SAMPLE = 5
"""A domain gets its own profile from this many attempts on."""


@dataclass(frozen=True)
class MemoryFit:
    """What the memory admission would let run at once on this host, now."""

    attempts: int
    described: str


@dataclass(frozen=True)
class Campaign:
    """What the forecast is for."""

    attempts: int
    """Attempts still to run."""
    max_active_tasks: int
    provider: str
    model: str
    quota: dict[str, QuotaLimit] | None
    upstreams: list[str] | None
    upstreams_from: str
    """Where the gateway's upstream labels came from, or why they are unknown."""
    memory: MemoryFit | None
    memory_binds: bool
    """False with the ray executor: guests run on the nodes, whose memory admits their own."""
    priced: bool
    """The run's prices have its model."""
    attempts_done: int | None = None
    quota_source: str = "the config"
    """Where `quota` came from, in words (or, without one, why none was observed)."""
    quota_observed: bool = False
    """`quota` is what the upstreams stated of themselves (observed.py), not the config's."""
    auto: bool = False
    """`max_active_tasks` is the ceiling of an admission that follows the quota (`"auto"`), not yet started."""


class DomainProfile(BaseModel):
    attempts: int
    tokens_per_attempt: Spread | None
    calls_per_attempt: Spread | None
    agent_phase_sec: Spread | None


class LimitCapacity(BaseModel):
    per_minute: int
    of: str


class Forecast(BaseModel):
    """The forecast as `--dry-run --json` prints it (`forecast`); None where a figure is unknown."""

    attempts: int
    """Attempts to run (tasks x repeats, less those final in the run directory)."""
    attempts_done: int | None
    sample_attempts: int
    """Attempts the figures come from (that reached the agent phase)."""
    sources: list[str]
    counted_tokens: str
    """Which tokens count against the provider's tokens-per-minute limit: `tokens_*` are these."""
    tokens_per_attempt: Spread | None
    input_tokens_per_attempt: Spread | None
    cached_input_tokens_per_attempt: Spread | None
    output_tokens_per_attempt: Spread | None
    calls_per_attempt: Spread | None
    agent_phase_sec: Spread | None
    attempt_sec: Spread | None
    tokens_per_minute_per_attempt: Spread | None
    """One running attempt's rate: its tokens over its agent phase less rate-limit waits."""
    calls_per_minute_per_attempt: Spread | None
    by_domain: dict[str, DomainProfile]
    quota: dict[str, LimitCapacity | None]
    """What the quota serves, per limit kind, and whose entries that is."""
    quota_from: str = "none"
    """Where the quota came from: the config, or observed (which gateway saw the upstreams state it, and when);
    without one, `none` and why none was observed."""
    upstreams: list[str] | None
    upstreams_from: str
    safe_concurrency: int | None
    """Whole attempts the quota serves at once, at least 1 (`safe_concurrency_exact` may be less)."""
    safe_concurrency_exact: float | None
    safe_concurrency_wait_share: float | None
    """The share of its agent phase an attempt waits on rate limits with `safe_concurrency` running."""
    binding: str | None
    memory_concurrency: int | None
    memory: str
    concurrency: float | None
    """How many attempts the wall time assumes at once (the quota may slow them: `wall_time_bound`)."""
    concurrency_binding: str | None
    tokens_total: Range
    calls_total: Range
    wall_time_sec: Range
    wall_time_bound: str | None
    """Which of `wall_time_bounds` the expected wall time took."""
    wall_time_bounds: dict[str, WallBound]
    """The campaign takes at least each: `attempts` (their length without rate-limit waits at `concurrency`),
    `tpm` and `rpm` (tokens and model calls over the quota's rates)."""
    cost_usd: Range
    unknown: list[str]
    """What the forecast cannot know, and why."""
    notes: list[str]


def _values(attempts: list[AttemptProfile], name: str) -> list[float]:
    return [value for a in attempts if (value := getattr(a, name)) is not None]


def make_forecast(sample: Sample, campaign: Campaign) -> Forecast:
    attempts, count = sample.attempts, campaign.attempts
    tokens, calls = _values(attempts, "quota_tokens"), _values(attempts, "calls")
    token_rate = spread(_values(attempts, "tokens_per_minute"))
    call_rate = spread(_values(attempts, "calls_per_minute"))
    unknown: list[str] = []
    notes = list(sample.notes)
    if not attempts:
        unknown.append("no attempt to learn from (give forecast_from: earlier runs of this agent and model, or wait "
                       "for this run's first attempts): tokens, calls, rates, wall time and cost are unknown")
    elif not tokens:
        unknown.append("no attempt with token figures (see notes): tokens, rates and cost are unknown")
    elif len(attempts) == 1:
        unknown.append("one attempt to learn from: the totals have no range (it takes two)")
    quota = dict(campaign.quota or {})
    safe, said = safe_concurrency(quota, campaign.provider, campaign.upstreams,
                                  token_rate.p90 if token_rate else None, call_rate.p90 if call_rate else None)
    notes += said
    if not quota:
        example = '{"%s": {"tpm": 450000}}' % campaign.provider  # noqa: UP031 (braces of JSON)
        unobserved = "" if campaign.quota_source == "the config" else f" and none was observed: {campaign.quota_source}"
        unknown.append(f'safe_concurrency: the config has no quota (e.g. "quota": {example}){unobserved}')
    elif safe is None and attempts:
        unknown.append("safe_concurrency: no rate of a kind the quota limits (see notes)")
    observed = "observed " if campaign.quota_observed else ""
    limits = {metric: capacity(quota, campaign.provider, campaign.upstreams, metric)[0] for metric in ("tpm", "rpm")}
    delivered, said = as_delivered(limits, sample.delivered, campaign.upstreams)
    notes += said
    memory = campaign.memory
    at_once = [(float(campaign.max_active_tasks), "auto's ceiling" if campaign.auto else "max_active_tasks")]
    if campaign.auto and safe is not None:
        at_once.append((safe.exact, f"auto, at the quota's safe concurrency ({observed}{safe.binding})"))
    if memory is None:
        unknown.append("memory_concurrency: this host's memory could not be read")
    elif campaign.memory_binds and memory.attempts >= 1:
        at_once.append((float(memory.attempts), "memory of this host"))
    elif campaign.memory_binds:
        unknown.append("wall time: this host's memory fits no guest now")
    concurrency, binding = min(at_once, key=lambda item: item[0])
    tokens_total, calls_total = sum_range(tokens, count), sum_range(calls, count)
    bounds = wall_bounds(sum_range(_values(attempts, "unthrottled_sec"), count), (concurrency, binding),
                         {"tpm": (tokens_total, delivered["tpm"]), "rpm": (calls_total, delivered["rpm"])}, observed)
    wall, bound = wall_time(bounds)
    notes += _waits_note(attempts)
    costs = _values(attempts, "cost_usd")
    if not campaign.priced:
        unknown.append(f"cost_usd: no price for {campaign.model} in the config's prices")
    elif tokens and len(costs) < len(tokens):
        notes.append(f"cost: {len(tokens) - len(costs)} attempts with rows that cannot be priced are left out")
    return Forecast(
        attempts=count, attempts_done=campaign.attempts_done, sample_attempts=len(attempts), sources=sample.sources,
        counted_tokens=COUNTED_TOKENS.get(campaign.provider, COUNTED_TOKENS["openai"]),
        tokens_per_attempt=spread(tokens), input_tokens_per_attempt=spread(_values(attempts, "input_tokens")),
        cached_input_tokens_per_attempt=spread(_values(attempts, "cached_input_tokens")),
        output_tokens_per_attempt=spread(_values(attempts, "output_tokens")), calls_per_attempt=spread(calls),
        agent_phase_sec=spread(_values(attempts, "agent_sec")), attempt_sec=spread(_values(attempts, "duration_sec")),
        tokens_per_minute_per_attempt=token_rate, calls_per_minute_per_attempt=call_rate,
        by_domain=by_domain(attempts),
        quota={metric: None if cap is None else LimitCapacity(per_minute=cap.per_minute, of=observed + cap.of)
               for metric, cap in limits.items()}, quota_from=campaign.quota_source if quota else _no_quota(campaign),
        upstreams=campaign.upstreams, upstreams_from=campaign.upstreams_from,
        safe_concurrency=None if safe is None else safe.attempts,
        safe_concurrency_exact=None if safe is None else safe.exact,
        safe_concurrency_wait_share=None if safe is None else safe.wait_share,
        binding=None if safe is None else observed + safe.binding,
        memory_concurrency=None if memory is None else memory.attempts,
        memory="unknown" if memory is None else memory.described
        + ("" if campaign.memory_binds else "; not used for the wall time: the ray nodes admit their own guests"),
        concurrency=round(concurrency, 3) if attempts else None, concurrency_binding=binding if attempts else None,
        tokens_total=tokens_total, calls_total=calls_total, wall_time_sec=wall,
        wall_time_bound=bound, wall_time_bounds=bounds,
        cost_usd=sum_range(costs, count) if campaign.priced else Range(), unknown=unknown, notes=notes)


def as_delivered(limits: dict[str, Capacity | None], delivered: dict[str, Delivered],
                 upstreams: list[str] | None) -> tuple[dict[str, Capacity | None], list[str]]:
    """The limits as the quota bounds the wall time: the one that bound the runs read that it throttled on the same
    upstream resources (the largest share of its stated rate delivered) at what it delivered to them, when that is
    less than it states (delivered.py); with notes on the runs left out."""
    resources = None if upstreams is None else frozenset(label.partition("@")[0] for label in upstreams)
    same = [d for d in delivered.values() if d.resources == resources]
    notes = [f"{path}: its quota throttled it on {', '.join(sorted(d.resources))}, not this run's upstreams "
             f"({'unknown' if resources is None else ', '.join(sorted(resources))}): what it was delivered is not used"
             for path, d in delivered.items() if d.resources != resources]
    capped = {metric: cap for metric, cap in limits.items() if cap is not None}
    if not same or not capped:
        return limits, notes
    shares = {metric: per_minute(same, metric) / cap.per_minute for metric, cap in capped.items()}
    bound = max(shares, key=shares.__getitem__)
    if shares[bound] >= 1:
        return limits, notes
    cap, minutes = capped[bound], sum(d.minutes for d in same)
    return {**limits, bound: Capacity(max(1, round(cap.per_minute * shares[bound])), (
        f"{bound} it delivered in {minutes} throttled minutes of its resources in the runs read, "
        f"{shares[bound]:.0%} of the {cap.per_minute} {cap.of}"))}, notes


def _waits_note(attempts: list[AttemptProfile]) -> list[str]:
    waited = sum(a.waited_sec for a in attempts if a.duration_sec is not None)
    if not waited:
        return []
    took = sum(a.duration_sec or 0.0 for a in attempts)
    return [f"the attempts learned from waited {waited:.0f} s on rate limits in all ({waited / took:.0%} of their "
            "time): the wall time takes their length without these waits, and the quota apart"]


def _no_quota(campaign: Campaign) -> str:
    return "none" if campaign.quota_source == "the config" else f"none ({campaign.quota_source})"


def by_domain(attempts: list[AttemptProfile]) -> dict[str, DomainProfile]:
    """A profile for every domain with at least DOMAIN_MIN_SAMPLE attempts."""
    grouped: dict[str, list[AttemptProfile]] = defaultdict(list)
    for attempt in attempts:
        if attempt.domain is not None:
            grouped[attempt.domain].append(attempt)
    return {domain: DomainProfile(attempts=len(group), tokens_per_attempt=spread(_values(group, "quota_tokens")),
                                  calls_per_attempt=spread(_values(group, "calls")),
                                  agent_phase_sec=spread(_values(group, "agent_sec")))
            for domain, group in sorted(grouped.items()) if len(group) >= DOMAIN_MIN_SAMPLE}
