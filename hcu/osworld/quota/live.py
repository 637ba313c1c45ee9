"""The forecast while a run goes: the earlier runs are read once, each attempt of the run is added as it
finishes, and the figures are computed again only when something changed (QUEUE_STATUS.md is rewritten every
second; the forecast is not). An admission that follows the quota reads `forecast(...).safe_concurrency`. Without a
quota in the config, the limits the upstreams state (observed.py) are read from the gateways' reports every
`ADMISSION.observe_sec`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from hcu.defaults import ADMISSION
from hcu.osworld.quota.forecast import Campaign, Forecast, make_forecast
from hcu.osworld.quota.gateway_reading import GatewayReport
from hcu.osworld.quota.observed import observed_quota, with_observed
from hcu.osworld.quota.profile import AttemptProfile, Sample
from hcu.osworld.quota.report import status_lines


class LiveForecast:
    def __init__(self, pilots: Sample, campaign: Campaign, observing: str | None = None) -> None:
        self.pilots, self.campaign = pilots, campaign
        self.observing = observing
        """Without a quota in the config: whose reports tell what the upstreams stated (None: the config's)."""
        self.observed_at = -math.inf
        self.own: dict[str, AttemptProfile] = {}
        """The run's finished attempts, by gateway scope (an attempt seen twice counts once)."""
        self._key: tuple[int, int, int] | None = None
        self._forecast: Forecast | None = None

    def add(self, profile: AttemptProfile) -> None:
        self.own.setdefault(profile.attempt_id, profile)

    def observe(self, now: float, reports: Callable[[], list[GatewayReport] | None]) -> None:
        """Read what the upstreams state of their limits (at most every `ADMISSION.observe_sec`, and only without
        a quota in the config); a reading that finds a limit it did not have computes the figures again."""
        if self.observing is None or now - self.observed_at < ADMISSION.observe_sec:
            return
        self.observed_at = now
        found = reports()
        if found is None:
            return
        observed = observed_quota(found, self.observing)
        if observed is None and self.campaign.quota_observed:
            return  # the upstreams' earlier answers still stand
        campaign = with_observed(self.campaign, observed)
        if campaign != self.campaign:
            self.campaign, self._forecast = campaign, None

    def forecast(self, to_go: int, max_active_tasks: int) -> Forecast:
        """The forecast for `to_go` attempts at `max_active_tasks` (under "auto", the limit it holds now), from
        forecast_from and the run's own."""
        key = (len(self.own), to_go, max_active_tasks)
        if self._forecast is None or key != self._key:
            sample = Sample([*self.pilots.attempts, *self.own.values()], self.pilots.sources, self.pilots.notes)
            campaign = replace(self.campaign, attempts=to_go, max_active_tasks=max_active_tasks, auto=False)
            self._key, self._forecast = key, make_forecast(sample, campaign)
        return self._forecast

    def lines(self, to_go: int, running: int, max_active_tasks: int) -> list[str]:
        """QUEUE_STATUS.md's lines for `to_go` attempts, `running` of them running now."""
        return status_lines(self.forecast(to_go, max_active_tasks), running, len(self.own))
