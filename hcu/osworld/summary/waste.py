"""Quota a run spent on attempts that gave no valid result, and how long its requests waited on rate limits.

An attempt gives a valid result when it is its repeat's attempt in tasks/ and its result has a score that counts
(rows.counted_score: the error table's `class_of` and `policy_for` decide). Every other attempt that ended spent
quota of which nothing is in the score: attempts set aside under retries/ (infrastructure broke them; never scored)
and attempts in tasks/ whose result is withheld (an evaluator or runner error, an unreadable result, a failure out
of retries). An attempt in tasks/ without a result yet (still running, or its runner died and the queue has not set
it aside) is neither: the summary leaves it out of the run's spend, as it does for the cost. `ValidResults` is that
rule, by gateway scope: the summary applies it to the token log's rows, and so does the viewer's quota chart.

Their spend builds on the set-aside attempts' (`retried` in summary.json) with the withheld attempts of tasks/
added: tokens and model calls from each attempt's usage, cost from its result (cost.py). The waits come from the
token log row by row: every request of the run's attempt scopes, and the part in the scopes of attempts that gave
no valid result. Unknown is None with why, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from hcu.osworld.records.cost import token_rows
from hcu.osworld.records.identity import attempt_of_scope
from hcu.osworld.summary.parts import RateLimitWaits, RetriedSpend, WastedSpend
from hcu.osworld.summary.rows import AttemptRow

TOKEN_LOG = "gateway-tokens.jsonl"
"""The token log's name in a run directory (the queue's default `token_log`)."""
TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


def token_log_of(run_dir: Path, configured: Path | None) -> Path | None:
    """The run's token log: the one in the run directory (a run directory copied elsewhere brings it), else the
    config's `token_log`; None when neither is a file."""
    for path in (run_dir / TOKEN_LOG, configured):
        if path is not None and path.is_file():
            return path
    return None


class Graded(Protocol):
    """An attempt in tasks/ as the summary or the viewer reads it."""

    key: str
    """Its folder name in tasks/."""

    @property
    def valid(self) -> bool:
        """Its result has a score that counts."""

    @property
    def ran(self) -> bool:
        """It left a result (readable or not)."""


G = TypeVar("G", bound=Graded)


def withheld_attempts(rows: Iterable[G]) -> list[G]:
    """The attempts in tasks/ that left a result and gave no valid result (their result is withheld)."""
    return [row for row in rows if row.ran and not row.valid]


@dataclass
class ValidResults:
    """Which attempts of a run gave no valid result, by gateway scope."""

    run_id: str
    task_ids: frozenset[str]
    ended_without: frozenset[str]
    """Repeats (tasks/ folder names) whose attempt in tasks/ left a result without a score that counts."""
    set_aside: frozenset[str]
    """Folder names under retries/ (`<repeat>-<attempt>`)."""
    _seen: dict[str, bool | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, run_id: str, task_ids: Iterable[str], graded: Iterable[Graded],
           set_aside: Iterable[str]) -> ValidResults:
        """From the attempts in tasks/ and the folder names under retries/."""
        return cls(run_id, frozenset(task_ids), frozenset(row.key for row in withheld_attempts(graded)),
                   frozenset(set_aside))

    def gave_no_valid_result(self, scope: str) -> bool | None:
        """True when the attempt of this scope ended without a valid result (set aside, or withheld in tasks/);
        False when it gave one or has no result yet; None for a scope of another run (a gateway shared between
        runs logs theirs too)."""
        if scope not in self._seen:
            attempt = attempt_of_scope(scope, self.run_id, self.task_ids)
            self._seen[scope] = None if attempt is None else (
                f"{attempt.task_key}-{attempt.attempt}" in self.set_aside or attempt.task_key in self.ended_without)
        return self._seen[scope]


def rate_limit_waits(token_log: Path | None, results: ValidResults) -> RateLimitWaits:
    """The token log's rate-limit waits over the run's requests, and the part in attempts without a valid result."""
    if token_log is None:
        return RateLimitWaits(wait_sec=None, without_valid_result_sec=None, requests=0, requests_waited=0,
                              unknown=f"no token log ({TOKEN_LOG} in the run directory, or the config's token_log)")
    waited = wasted = 0.0
    requests = requests_waited = 0
    for row in token_rows(token_log.read_bytes()):
        wasted_row = results.gave_no_valid_result(str(row.get("task")))
        if wasted_row is None:
            continue
        requests += 1
        seconds = row.get("rate_limit_wait_sec")
        if isinstance(seconds, (int, float)) and seconds > 0:
            requests_waited += 1
            waited += seconds
            wasted += seconds if wasted_row else 0.0
    if not requests:
        return RateLimitWaits(wait_sec=None, without_valid_result_sec=None, requests=0, requests_waited=0,
                              unknown=f"{token_log.name} holds no request of run {results.run_id}")
    return RateLimitWaits(wait_sec=round(waited, 3), without_valid_result_sec=round(wasted, 3), requests=requests,
                          requests_waited=requests_waited)


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def wasted_spend(retried: RetriedSpend, withheld: Sequence[AttemptRow], cost_usd: float | None, cost_unknown: str,
                 run_cost_usd: float | None, run_tokens: int, run_model_calls: int) -> WastedSpend:
    """The set-aside attempts' spend (`retried`) plus that of the `withheld` attempts of tasks/ (rows that ran
    without a valid result); shares of the run's cost, tokens (of attempts fully accounted) and model calls."""
    accounted = [row for row in withheld if row.usage_accounted]
    tokens = {name: getattr(retried, name) + sum(getattr(row, name) for row in accounted) for name in TOKEN_FIELDS}
    total = tokens["input_tokens"] + tokens["output_tokens"]
    calls = retried.model_calls + sum(row.model_calls or 0 for row in withheld)
    return WastedSpend(
        attempts=retried.attempts + len(withheld), set_aside=retried.attempts, withheld=len(withheld),
        machine_sec=retried.machine_sec + sum(row.duration_sec or 0.0 for row in withheld), model_calls=calls,
        accounted_attempts=retried.accounted_attempts + len(accounted), **tokens, total=total, cost_usd=cost_usd,
        cost_unknown=cost_unknown, share_of_cost=_share(cost_usd, run_cost_usd),
        share_of_tokens=_share(total, run_tokens), share_of_model_calls=_share(calls, run_model_calls))
