"""Where every request is written down: a charged request's row at once, free traffic as `hcu.gateway.refusals`
decides, and the token log's two ceilings.

- **Charged rows** (a request that reached the upstream or held a budget slot) are written one by one, at once,
  whatever the ceilings say, and kept in memory while the log cannot take them: the budget and the accounting
  stay exact.
- **Per scope**, the rows of one task scope's requests that used no budget slot (its free calls, its refusals
  and their aggregate rows: what it got for free) may take `max_log_bytes_per_scope` of the log; its
  generations are bounded by its budget instead, and never end an attempt here. The row that reaches the
  ceiling closes the scope: from then on each of its requests is refused before anything of it is read
  (403 `token_log_ceiling`, counted, no row), `/healthz?task=` says `log_ceiling_reached`, and the runner ends
  the attempt as `guest_flood`. Requests already in flight finish, and their charged rows are written. Every
  other scope goes on as before.
- **Per log**, refusal rows (their own and aggregate) may take `max_refusal_log_bytes`. Past it refusals are
  counted and not written; a withheld row still counts toward its scope's ceiling, so a scope that keeps
  flooding is still closed.

What the log holds (bytes per scope, refusal bytes, refusals per scope) is restored from it at start.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from hcu.defaults import GatewayDefaults
from hcu.gateway.budget import Budget
from hcu.gateway.clock import Clock
from hcu.gateway.refusals import FLOOD, Refusals, Window
from hcu.gateway.restore import Restored
from hcu.gateway.tokenlog import TokenLog

log = logging.getLogger("hcu.gateway")


@dataclass(frozen=True)
class GateRefusal:
    """A request refused before anything of it is read."""

    status: int
    code: str
    message: str
    retry_after_sec: float | None = None

    def headers(self) -> dict[str, str] | None:
        if self.retry_after_sec is None:
            return None
        return {"Retry-After": str(max(1, math.ceil(self.retry_after_sec)))}


class Ledger:
    """The token log as the exchanges write to it, with its ceilings and the refusal counters."""

    def __init__(self, limits: GatewayDefaults, token_log: TokenLog, budget: Budget, provider: str,
                 clock: Clock) -> None:
        self.limits, self.log, self.budget, self.provider, self.clock = limits, token_log, budget, provider, clock
        self.refusals = Refusals(limits, clock, self._write_aggregate)
        self.scope_bytes: dict[str, int] = {}
        """Bytes each scope's rows of requests without a budget slot take in the log (withheld refusal rows
        included): what its ceiling counts."""
        self.closed: set[str] = set()
        """Scopes at their ceiling."""
        self.refusal_bytes = 0
        """Bytes refusal rows take in the log."""
        self.withheld = 0
        """Refusal rows not written because refusal rows had reached `max_refusal_log_bytes`."""

    def restore(self, restored: Restored) -> None:
        """Take what the log of an earlier run of this gateway says."""
        self.refusals.restore(restored.refusals)
        self.refusal_bytes = restored.refusal_bytes
        for task, size in restored.scope_bytes.items():
            self._grow(task, size)

    def gate(self, task: str, path: str) -> GateRefusal | None:
        """Refuse a request of a closed or flooding scope before anything of it is read; None lets it in."""
        if task in self.closed:
            self.refusals.count_ceiling(task)
            return GateRefusal(403, "token_log_ceiling", f"task scope {task} reached its token-log ceiling "
                               f"({self.limits.max_log_bytes_per_scope} bytes): the gateway serves it no more")
        left = self.refusals.flooding(task)
        if left is None:
            return None
        self.refusals.count(task, FLOOD, 429, path)
        return GateRefusal(429, "too_many_refused_requests",
                           f"task scope {task} sent {self.limits.flood_refusals_per_interval} requests "
                           f"the gateway refused in {self.limits.refusal_interval_sec:g} s; retry after the "
                           "interval", left)

    def take_free_call(self, task: str) -> GateRefusal | None:
        """A free call (token counting, model listing) of `task`: None lets it go upstream; past the scope's
        rate it is refused, before its body is read."""
        left = self.refusals.take_free_call(task)
        if left is None:
            return None
        return GateRefusal(429, "too_many_free_calls", f"more than {self.limits.free_calls_per_interval} token-"
                           f"counting and model-listing calls in {self.limits.refusal_interval_sec:g} s", left)

    def write(self, fields: dict, *, charged: bool, budgeted: bool) -> None:
        """Write down one request, given as a dict with TokenLogRow's fields. `charged`: it reached the
        upstream or held a budget slot; `budgeted`: it held a budget slot."""
        task = fields["task"]
        if charged:
            row = self.log.encode(fields)
            self.log.append(row, charged=True)
            if not budgeted:
                self._grow(task, len(row))
            return
        own_row = self.refusals.count(task, fields["outcome"], fields["status"], fields["path"])
        if own_row and task not in self.closed:
            self._write_refusal(task, self.log.encode(fields))

    def sweep(self) -> None:
        self.refusals.sweep()

    def close(self) -> None:
        self.refusals.close()

    def view(self, task: str) -> dict[str, object]:
        """The scope's part of `/healthz?task=`."""
        return {**self.refusals.view(task), "log_bytes": self.scope_bytes.get(task, 0),
                "log_ceiling_reached": task in self.closed}

    def status(self) -> dict[str, object]:
        """The refusals and ceilings part of the host's `/healthz`."""
        return {
            **self.refusals.status(),
            "max_log_bytes_per_scope": self.limits.max_log_bytes_per_scope,
            "scopes_at_ceiling": len(self.closed),
            "scopes_at_ceiling_shown": sorted(self.closed)[:10],
            "refusal_log_bytes": self.refusal_bytes,
            "max_refusal_log_bytes": self.limits.max_refusal_log_bytes,
            "refusal_rows_withheld": self.withheld,
        }

    def _write_aggregate(self, task: str, window: Window) -> None:
        if task in self.closed:
            return  # the scope may write no more; its counts stay in memory
        st = self.budget.tasks.get(task)
        self._write_refusal(task, self.log.encode({
            "time": window.last, "task": task, "provider": self.provider, "upstream": None, "deployment": None,
            "model": None, "path": window.path, "status": window.status, "outcome": "refusals", "counted": False,
            "calls_used": st.calls_used if st is not None else 0, "usage": None, "latency_sec": 0.0,
            "ttfb_sec": None, "rate_limit_wait_sec": 0.0, "attempts": 0, "upstream_request_id": None,
            "response_id": None,
            "refusals": {"count": sum(window.kinds.values()), "kinds": _sorted(window.kinds),
                         "first": window.first, "last": window.last},
        }))

    def _write_refusal(self, task: str, row: bytes) -> None:
        if self.refusal_bytes + len(row) <= self.limits.max_refusal_log_bytes:
            self.log.append(row, charged=False)
            self.refusal_bytes += len(row)
        else:
            self.withheld += 1
        self._grow(task, len(row))

    def _grow(self, task: str, size: int) -> None:
        total = self.scope_bytes[task] = self.scope_bytes.get(task, 0) + size
        if total >= self.limits.max_log_bytes_per_scope and task not in self.closed:
            self.closed.add(task)
            log.warning("task %s: its token-log rows reached %d bytes (max_log_bytes_per_scope %d): the gateway "
                        "serves it no more", task, total, self.limits.max_log_bytes_per_scope)


def _sorted(kinds: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(kinds.items()))
