"""The model's generations of one attempt, from the gateway's token-log rows of its scope (host clock).

Each successful generation becomes one agent step's metrics: its tokens, latency and rate-limit waits, with the
requests that failed before it (rate limits, errors, cuts) as part of the same step. Requests that failed with
no success after them (a budget refusal, a turn that ended on a rate limit) are kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hcu.gateway.restore import TRACKED as GENERATION_OUTCOMES
from hcu.gateway.tokenlog import TokenLogRow, read_token_log
from hcu.osworld.evidence.atif import StepMetrics
from hcu.osworld.evidence.cost import Prices, generation_cost
from hcu.osworld.records.cost import cost_for_scope


@dataclass
class Generation:
    row: TokenLogRow
    failed_before: list[TokenLogRow] = field(default_factory=list)
    cost_usd: float | None = None

    @property
    def started_at(self) -> float:
        return self.row.time - self.row.latency_sec

    @property
    def ended_at(self) -> float:
        return self.row.time

    def metrics(self) -> StepMetrics:
        usage = self.row.usage
        extra = {
            "reasoning_tokens": usage.reasoning_tokens if usage else None,
            "latency_sec": self.row.latency_sec,
            "ttfb_sec": self.row.ttfb_sec,
            "rate_limit_wait_sec": round(sum(r.rate_limit_wait_sec for r in [*self.failed_before, self.row]), 3),
            "failed_requests": [request_summary(r) for r in self.failed_before],
            "upstream": self.row.upstream,
            "deployment": self.row.deployment,
        }
        return StepMetrics(prompt_tokens=usage.input_tokens if usage else None,
                           completion_tokens=usage.output_tokens if usage else None,
                           cached_tokens=usage.cached_input_tokens if usage else None,
                           cost_usd=self.cost_usd, extra=extra)


@dataclass
class ScopeGenerations:
    generations: list[Generation]
    unanswered: list[TokenLogRow]
    """Failed requests after the last success."""
    total_cost_usd: float | None
    """What the scope's rows cost, as result.json's cost_usd says (None: unknown)."""


def scope_generations(token_log: Path | None, scope: str, prices: Prices) -> ScopeGenerations:
    rows = sorted((r for r in read_token_log(token_log) if r.task == scope and r.outcome in GENERATION_OUTCOMES)
                  if token_log is not None else [], key=lambda r: r.time)
    generations: list[Generation] = []
    failed: list[TokenLogRow] = []
    for row in rows:
        if row.outcome != "success":
            failed.append(row)
            continue
        generations.append(Generation(row, failed, generation_cost(row.usage, row.model, prices)))
        failed = []
    return ScopeGenerations(generations, failed, cost_for_scope(token_log, scope, prices))


def request_summary(row: TokenLogRow) -> dict:
    return {"outcome": row.outcome, "status": row.status, "ended_at": row.time, "latency_sec": row.latency_sec,
            "rate_limit_wait_sec": row.rate_limit_wait_sec, "counted": row.counted}
