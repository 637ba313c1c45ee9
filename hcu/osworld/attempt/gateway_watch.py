"""The gateway as the agent phase watches it: one task's state, polled, with the gateway allowed to be away
for a bounded time (a restart on the same token log, a missed poll), and the rate-limit waits it is in.

The token log is what survives a gateway restart, so the gateway being away says nothing about the attempt
until it has been away longer than `away_sec`; then the attempt ends as `gateway`. A scope the gateway has
closed at its token-log ceiling (the guest flooded it with requests it got for free) ends the attempt at the
next poll as `guest_flood`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from hcu.gateway.budget import TaskStateView
from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.errors import GatewayError, GuestFloodError

log = logging.getLogger("hcu.run_task")


@dataclass(frozen=True)
class Clock:
    """Time as the agent phase reads it; tests inject their own."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()

class GatewayWatch:
    """Polls `/healthz?task=<scope>`; `last` is the latest state seen (a fresh one while the gateway answers)."""

    def __init__(self, gateway_url: str, scope: str, *, away_sec: float, secret: str | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        """`secret`: the scope's secret, which a gateway with per-task secrets asks for its state."""
        self.gateway_url, self.scope, self.away_sec, self.clock = gateway_url, scope, away_sec, clock
        self._secret = secret
        self.last = TaskStateView(task=scope)
        self.away_since: float | None = None

    def poll(self) -> TaskStateView | None:
        """The task's state now, or None while the gateway is away within `away_sec`; GatewayError after, and
        GuestFloodError once the gateway has closed the scope at its token-log ceiling."""
        try:
            health = gateway_health(self.gateway_url, task=self.scope, secret=self._secret)
            view = health.task or TaskStateView(task=self.scope)
        except GatewayError as exc:
            now = self.clock.monotonic()
            if self.away_since is None:
                self.away_since = now
                log.warning("%s; tolerated for %g s (gateway_away_seconds)", exc, self.away_sec)
            if now - self.away_since > self.away_sec:
                raise GatewayError(f"{exc}; away for more than {self.away_sec:g} s (gateway_away_seconds)") \
                    from None
            return None
        if self.away_since is not None:
            log.info("gateway %s answers again after %.1f s", self.gateway_url,
                     self.clock.monotonic() - self.away_since)
            self.away_since = None
        self.last = view
        if view.log_ceiling_reached:
            raise GuestFloodError(f"the guest's requests the gateway refused or served for free reached the token-log "
                                  f"ceiling of scope {self.scope} ({view.log_bytes} bytes; {_largest(view.refusals)})"
                                  "; the gateway serves it no more")
        return view


def _largest(refusals: dict[str, int]) -> str:
    """The scope's refusals, largest kinds first, in words."""
    ranked = sorted(refusals.items(), key=lambda item: -item[1])[:3]
    return ", ".join(f"{count} {kind}" for kind, count in ranked) or "no refusals"


class RateLimitWaits:
    """Seconds the gateway has spent waiting out rate limits for the task, the wait in progress included.

    The gateway adds a wait to `rate_limit_wait_sec` when it ends; a wait still running shows only as
    `waiting_now`, so its length so far is counted here, from the poll that first saw it."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._finished = 0

    def seconds(self, state: TaskStateView, now: float) -> float:
        if not state.waiting_now:
            self._since = None
            return state.rate_limit_wait_sec
        if self._since is None or state.rate_limit_waits != self._finished:  # a new wait (or the next one)
            self._since, self._finished = now, state.rate_limit_waits
        return state.rate_limit_wait_sec + (now - self._since)
