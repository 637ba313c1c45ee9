"""How many attempts the queue runs at once: a fixed `max_active_tasks`, or under `"auto"` the admission that
follows the quota (admission.py), less one attempt for every guest that ran out of memory (errors.py
`lowers_active_tasks`). Every limit is a `limit` event: the auto rule states its own; a fixed limit is stated at
the start and whenever it changes (`ctl set`, a memory failure). `ctl set` may switch between the two."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from hcu.osworld.queue.admission import AutoAdmission, ReportSource
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.run_config import AUTO, RunConfig

EventSink = Callable[..., None]
"""`PanelQueue._event`: the name of the event, then its fields."""
SafeConcurrency = Callable[[int], int | None]
"""The forecast's safe concurrency for a ceiling (None: the forecast has none)."""


class LaunchLimit:
    def __init__(self, config: RunConfig, reports: ReportSource, lowered: int, event: EventSink) -> None:
        self.config, self.reports, self.event = config, reports, event
        self.lowered = lowered
        """Attempts fewer than the limit that run at once: one per guest that ran out of memory."""
        self.admission = AutoAdmission(config, reports) if config.max_active_tasks == AUTO else None
        """Under "auto"; it replaces the launch pause after a rate-limited attempt (errors.py), which holds under
        a fixed max_active_tasks."""
        self.announced, self.reason = 0, "max_active_tasks"
        """The limit as the last `limit` event stated it, and why."""

    @property
    def auto(self) -> bool:
        return self.admission is not None

    @property
    def value(self) -> int:
        base = self.admission.limit if self.admission else self.config.active_ceiling
        return max(1, base - self.lowered)

    def begin(self, safe: SafeConcurrency, now: float) -> None:
        """Once what the last queue left is taken: under auto a restart resumes its limit, else the forecast's."""
        if self.admission is not None:
            self.event("limit", **self.admission.begin(safe(self.config.active_ceiling), now).event)

    def tick(self, now: float, active: Iterable[ActiveAttempt], slots: int | None,
             set_keys: Collection[str]) -> None:
        """Every poll: the auto rule reads its signal; a fixed limit that changed is stated."""
        if self.admission is not None:
            if decision := self.admission.tick(now, active, slots):
                self.event("limit", **decision.event)
        elif (limit := self.value) != self.announced:
            self.event("limit", limit=limit, previous=self.announced or None, signal=self._fixed_reason(set_keys))

    def reconfigure(self, config: RunConfig, safe: SafeConcurrency, now: float) -> None:
        """`ctl set` changed the run's settings: a fixed number, auto from now on, or auto's new ceiling."""
        self.config = config
        if config.max_active_tasks != AUTO:
            self.admission = None  # the next tick states the fixed number
        elif self.admission is None:
            self.admission = AutoAdmission(config, self.reports)
            self.begin(safe, now)
        elif decision := self.admission.reconfigure(config, now):
            self.event("limit", **decision.event)

    def rate_limited(self, launched_at: float | None) -> None:
        """An attempt ended upstream_rate_limit: the auto rule's strong lower signal."""
        if self.admission is not None:
            self.admission.rate_limited(launched_at)

    def noted(self, fields: dict[str, object]) -> None:
        """A `limit` event went out (from here or from the rule)."""
        self.announced, self.reason = int(str(fields["limit"])), str(fields.get("signal") or "")

    def describe(self, now: float) -> str:
        """Why the limit is what it is, for QUEUE_STATUS.md and the live view."""
        return self.admission.describe(now) if self.admission else self.reason

    def _fixed_reason(self, set_keys: Collection[str]) -> str:
        why = "max_active_tasks" + (" (ctl set)" if "max_active_tasks" in set_keys else "")
        return why + (f" {self.config.max_active_tasks} lowered by {self.lowered}: guests ran out of memory"
                      if self.lowered else "")
