"""The run's spend, read from its token log as the log grows, for the campaign ceiling `max_cost_usd`.

Every poll reads only the bytes added since the last one (complete lines; a torn last line waits for its end),
keeps the rows of this run's attempt scopes (a gateway shared with other runs logs theirs too) and prices them
with the run's `prices` (records/cost.py). Rows that cannot be priced (a model without a price) are not in the
spend; the status says how many there are. With the ray executor and node gateways, an attempt's rows reach the
run's token log when its results come home, so the spend of attempts still running on nodes shows up then.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from hcu.osworld.queue.snapshot import RateLimitFigures
from hcu.osworld.records.cost import Cost, token_rows
from hcu.osworld.records.identity import attempt_of_scope
from hcu.osworld.run_config import RunConfig
from hcu.record_io import GrowingFile

RATE_LIMIT_WINDOW_SEC = 60.0
"""How far back the rate-limit waits shown now reach."""


def usd(value: float) -> str:
    return f"{value:.2f}"


def ceiling_message(limit: float, spent: float) -> str:
    return f"launches stopped: max_cost_usd {usd(limit)} reached ({usd(spent)} spent)"


class SpendMeter:
    """What the run's attempts have cost so far, in total and per attempt scope."""

    def __init__(self, config: RunConfig) -> None:
        self.path: Path | None = config.token_log
        self.run_id, self.prices = str(config.run_id), dict(config.prices or {})
        self.limit = config.max_cost_usd
        self.task_ids = frozenset(task.id for task in config.tasks)
        self._ours: dict[str, bool] = {}
        self._log = GrowingFile(self.path) if self.path is not None else None
        self._reset()

    def _reset(self) -> None:
        self.total, self.scopes = Cost(), {}
        self.tokens = 0
        """Input + output tokens of the run's rows."""
        self.waits: deque[tuple[float, float]] = deque()
        """(when logged, seconds waited) of the run's rows that waited on a rate limit, newest last."""

    def refresh(self) -> float:
        """Read what the log gained; returns the priced spend in USD."""
        if self._log is None:
            return self.total.usd
        restarted, complete = self._log.read()
        if restarted:  # a new or rewritten log: read it from the start
            self._reset()
        for row in token_rows(complete):
            scope = str(row.get("task"))
            if self._is_ours(scope):
                self.total.add(row, self.prices)
                self.scopes.setdefault(scope, Cost()).add(row, self.prices)
                self._count(row)
        return self.total.usd

    def _count(self, row: dict) -> None:
        usage, waited, logged = row.get("usage"), row.get("rate_limit_wait_sec"), row.get("time")
        if isinstance(usage, dict):
            self.tokens += sum(v for v in (usage.get("input_tokens"), usage.get("output_tokens"))
                               if isinstance(v, int))
        if isinstance(waited, (int, float)) and waited > 0 and isinstance(logged, (int, float)):
            self.waits.append((float(logged), float(waited)))

    def rate_limits(self, now: float, launches_paused_until: float) -> RateLimitFigures:
        """Rate-limit waits now: the queue's launch pause, and the run's requests logged in the last
        RATE_LIMIT_WINDOW_SEC that had waited on a rate limit."""
        self.refresh()
        while self.waits and self.waits[0][0] < now - RATE_LIMIT_WINDOW_SEC:
            self.waits.popleft()
        return RateLimitFigures(launches_paused_until=launches_paused_until if launches_paused_until > now else 0.0,
                                waited_requests=len(self.waits), waited_sec=sum(w for _, w in self.waits),
                                window_sec=RATE_LIMIT_WINDOW_SEC)

    def _is_ours(self, scope: str) -> bool:
        known = self._ours.get(scope)
        if known is None:
            known = self._ours[scope] = attempt_of_scope(scope, self.run_id, self.task_ids) is not None
        return known

    def scope_cost(self, scope: str) -> float | None:
        """What one attempt's rows cost so far (None: a row could not be priced)."""
        self.refresh()
        return self.scopes.get(scope, Cost()).value

    def reached(self) -> bool:
        """True once the spend has reached max_cost_usd (never without one)."""
        return self.limit is not None and self.refresh() >= self.limit

    def describe(self) -> str:
        """One line for QUEUE_STATUS.md."""
        if not self.prices:
            return "Spend: unknown (the config has no prices)."
        spent = f"Spend: {usd(self.refresh())} USD"
        line = f"{spent} of max_cost_usd {usd(self.limit)}" if self.limit is not None else f"{spent} (no max_cost_usd)"
        unknown = self.total.unknown_because()
        return f"{line}, from the token log{f'; not counted: {unknown}' if unknown else ''}."
