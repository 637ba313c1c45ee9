"""The forecast while a run goes: the earlier runs are read once, each attempt of the run is added as it
finishes, and the figures are computed again only when something changed (QUEUE_STATUS.md is rewritten every
second; the forecast is not). An admission that follows the quota reads `forecast(...).safe_concurrency`."""

from __future__ import annotations

from dataclasses import replace

from hcu.osworld.quota.forecast import Campaign, Forecast, make_forecast
from hcu.osworld.quota.profile import AttemptProfile, Sample
from hcu.osworld.quota.report import status_lines


class LiveForecast:
    def __init__(self, pilots: Sample, campaign: Campaign) -> None:
        self.pilots, self.campaign = pilots, campaign
        self.own: dict[str, AttemptProfile] = {}
        """The run's finished attempts, by gateway scope (an attempt seen twice counts once)."""
        self._key: tuple[int, int, int] | None = None
        self._forecast: Forecast | None = None

    def add(self, profile: AttemptProfile) -> None:
        self.own.setdefault(profile.attempt_id, profile)

    def forecast(self, to_go: int, max_active_tasks: int) -> Forecast:
        """The forecast for `to_go` attempts at `max_active_tasks`, from forecast_from and the run's own."""
        key = (len(self.own), to_go, max_active_tasks)
        if self._forecast is None or key != self._key:
            sample = Sample([*self.pilots.attempts, *self.own.values()], self.pilots.sources, self.pilots.notes)
            campaign = replace(self.campaign, attempts=to_go, max_active_tasks=max_active_tasks)
            self._key, self._forecast = key, make_forecast(sample, campaign)
        return self._forecast

    def lines(self, to_go: int, running: int, max_active_tasks: int) -> list[str]:
        """QUEUE_STATUS.md's lines for `to_go` attempts, `running` of them running now."""
        return status_lines(self.forecast(to_go, max_active_tasks), running, len(self.own))
