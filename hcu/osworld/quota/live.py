"""The forecast while a run goes: the earlier runs are read once, each attempt of the run is added as it
finishes, and the figures are computed again only when something changed (QUEUE_STATUS.md is rewritten every
second; the forecast is not)."""

from __future__ import annotations

from dataclasses import replace

from hcu.osworld.quota.forecast import Campaign, make_forecast
from hcu.osworld.quota.profile import AttemptProfile, Sample
from hcu.osworld.quota.report import status_lines


class LiveForecast:
    def __init__(self, pilots: Sample, campaign: Campaign) -> None:
        self.pilots, self.campaign = pilots, campaign
        self.own: dict[str, AttemptProfile] = {}
        """The run's finished attempts, by gateway scope (an attempt seen twice counts once)."""
        self._key: tuple[int, int, int, int] | None = None
        self._lines: list[str] = []

    def add(self, profile: AttemptProfile) -> None:
        self.own.setdefault(profile.attempt_id, profile)

    def lines(self, to_go: int, running: int, max_active_tasks: int) -> list[str]:
        """The status lines for `to_go` attempts (`running` of them running now) at `max_active_tasks`."""
        key = (len(self.own), to_go, running, max_active_tasks)
        if key != self._key:
            sample = Sample([*self.pilots.attempts, *self.own.values()], self.pilots.sources, self.pilots.notes)
            campaign = replace(self.campaign, attempts=to_go, max_active_tasks=max_active_tasks)
            self._key, self._lines = key, status_lines(make_forecast(sample, campaign), running, len(self.own))
        return self._lines
