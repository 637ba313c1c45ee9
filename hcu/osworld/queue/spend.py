"""The run's spend, read from its token log as the log grows, for the campaign ceiling `max_cost_usd`.

Every poll reads only the bytes added since the last one (complete lines; a torn last line waits for its end),
keeps the rows of this run's attempt scopes (a gateway shared with other runs logs theirs too) and prices them
with the run's `prices` (records/cost.py). Rows that cannot be priced (a model without a price) are not in the
spend; the status says how many there are. With the ray executor and node gateways, an attempt's rows reach the
run's token log when its results come home, so the spend of attempts still running on nodes shows up then.
"""

from __future__ import annotations

import os
from pathlib import Path

from hcu.osworld.queue.config import RunConfig
from hcu.osworld.records.cost import Cost, token_rows
from hcu.osworld.records.identity import attempt_of_scope


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
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self.identity, self.offset = identity, 0
        self.total, self.scopes = Cost(), {}

    def refresh(self) -> float:
        """Read what the log gained; returns the priced spend in USD."""
        if self.path is None:
            return self.total.usd
        try:
            with self.path.open("rb") as log:
                stat = os.fstat(log.fileno())
                if (stat.st_dev, stat.st_ino) != self.identity or stat.st_size < self.offset:
                    self._reset((stat.st_dev, stat.st_ino))  # a new or rewritten log: read it from the start
                log.seek(self.offset)
                data = log.read(stat.st_size - self.offset)
        except FileNotFoundError:
            return self.total.usd
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for row in token_rows(complete):
            scope = str(row.get("task"))
            if self._is_ours(scope):
                self.total.add(row, self.prices)
                self.scopes.setdefault(scope, Cost()).add(row, self.prices)
        return self.total.usd

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
