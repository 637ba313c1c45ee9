"""One run of bench_quota.py's scenario: a campaign of stand-in attempts (quota_fleet.py) under the real queue
(`run_queue`, with its admission fixed or "auto") through the real gateway against a scripted quota
(quota_world.py), on simulated time; its figures; and the campaign forecast (hcu/osworld/quota) learned from a
pilot run, to set against them.

A campaign either runs to its end (the pilot, the unthrottled baseline) or stands for a long one: it has more
attempts than it can run, is stopped at a horizon (as Ctrl-C would stop the queue) and measured over a window that
leaves its start out (the admission's first minutes, when every attempt starts at once), as a campaign of hundreds
of attempts is in its steady part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench.quota_fleet import AttemptRecord, CallDone, StandInFleet
from bench.quota_profile import MODEL, PRICES, AttemptPlan
from bench.quota_world import QueueSimClock, QuotaSpec, SimClock, World
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.quota.forecast import Campaign, Forecast, MemoryFit, make_forecast
from hcu.osworld.quota.limits import QuotaLimit
from hcu.osworld.quota.profile import read_pilots
from hcu.osworld.records.cost import ModelPrice
from hcu.osworld.run_config import parse_config

AUTO = "auto"
POLL_SEC = 5.0
"""The queue's poll, simulated seconds (its default)."""
FORECAST_ATTEMPTS = 1000
"""The campaign the forecast is asked about (its figures are compared per attempt)."""


@dataclass
class Horizon:
    """Where a long campaign is measured: from `start_sec` after its start until it is stopped at `stop_sec`."""

    start_sec: float
    stop_sec: float


class HorizonClock(QueueSimClock):
    """The queue's simulated clock that opens the measuring window (`opened`, once) and stops the queue at the
    horizon (KeyboardInterrupt, as Ctrl-C)."""

    def __init__(self, sim: SimClock, horizon: Horizon, opened: Callable[[], None]) -> None:
        super().__init__(sim)
        self.begin = sim.now()
        self.horizon, self.opened, self.open = horizon, opened, False

    def sleep(self, seconds: float) -> None:  # type: ignore[override]
        super().sleep(seconds)
        elapsed = self.time() - self.begin
        if not self.open and elapsed >= self.horizon.start_sec:
            self.open = True
            self.opened()
        if elapsed >= self.horizon.stop_sec:
            raise KeyboardInterrupt


@dataclass
class RunFigures:
    """What one campaign came to over its window (simulated Unix seconds)."""

    setting: str
    attempts: list[AttemptRecord]
    start: float
    end: float
    gateway_wait_sec: float
    """The gateway's rate-limit waits within the window, all scopes."""
    forecast: Forecast | None = None
    limits: list[tuple[float, int]] = field(default_factory=list)
    """Every limit the queue stated, with when."""
    throttled: dict[str, Forecast] = field(default_factory=dict)
    """The same campaign's forecast learned from pilots the quota throttled, by pilot."""

    @property
    def valid_charged(self) -> int:
        """Tokens the quota charged in the window for work that became (or may still become) a valid result:
        the calls of attempts that failed count nothing."""
        return sum(call.charged for a in self.attempts if a.outcome in ("valid", "running")
                   for call in a.calls_within(self.start, self.end))

    def valid(self, charged_per_attempt: float) -> float:
        """Valid results in the window: their work in quota tokens, over what one attempt is charged."""
        return self.valid_charged / charged_per_attempt

    def quota_share(self, tpm: int) -> float:
        """The share of the quota that went to valid results: valid results per hour over the quota's bound."""
        return self.valid_charged / (tpm * (self.end - self.start) / 60)

    @property
    def valid_ended(self) -> int:
        """Valid results that ended in the window."""
        return sum(a.outcome == "valid" and self.start < a.ended_at <= self.end for a in self.attempts)

    @property
    def rate_limited(self) -> int:
        """Attempts that ended upstream_rate_limit, in the whole run."""
        return sum(a.outcome == "upstream_rate_limit" for a in self.attempts)

    @property
    def crashed(self) -> list[str]:
        return [a.outcome for a in self.attempts if a.outcome.startswith("crashed")]

    def valid_per_hour(self, charged_per_attempt: float) -> float:
        return self.valid(charged_per_attempt) * 3600 / (self.end - self.start)

    @property
    def held_sec(self) -> float:
        return sum(a.held_within(self.start, self.end) for a in self.attempts)

    def held_per_valid_sec(self, charged_per_attempt: float) -> float:
        """Guest-held seconds in the window, failed attempts' included, per valid result."""
        valid = self.valid(charged_per_attempt)
        return self.held_sec / valid if valid else float("inf")

    @property
    def wait_share(self) -> float:
        """Of the guest-held time, the share spent waiting on rate limits: the gateway's waits and the resume
        delays after rate-limited turns."""
        resumed = sum(a.resumed_within(self.start, self.end) for a in self.attempts)
        return (self.gateway_wait_sec + resumed) / self.held_sec if self.held_sec else 0.0

    def _calls(self) -> list[CallDone]:
        return [call for a in self.attempts for call in a.calls_within(self.start, self.end)]

    def tokens_per_valid(self, charged_per_attempt: float) -> float:
        """Tokens as the forecast counts them (input, cached included, plus output) in the window, failed
        attempts' included, per valid result."""
        valid = self.valid(charged_per_attempt)
        return sum(call.tokens for call in self._calls()) / valid if valid else float("inf")

    def cost_per_valid(self, charged_per_attempt: float) -> float:
        valid = self.valid(charged_per_attempt)
        return sum(call.cost_usd for call in self._calls()) / valid if valid else float("inf")

    @property
    def mean_limit(self) -> float | None:
        """The admission's limit averaged over the window (None: it never stated one)."""
        if not self.limits:
            return None
        total, (at, limit) = 0.0, self.limits[0]
        for next_at, next_limit in [*self.limits[1:], (self.end, 0)]:
            total += limit * max(0.0, min(next_at, self.end) - max(at, self.start))
            at, limit = next_at, next_limit
        return total / (self.end - self.start)


def run_config(root: Path, run_id: str, gateway_url: str, tasks: list[str], setting: int | str, ceiling: int,
               quota: dict[str, dict[str, int]] | None, pilot: Path | None) -> dict:
    """The campaign's run config, as a user writes it."""
    body: dict = {"run_id": run_id, "benchmark_version": "v1", "agent": "codex", "model": MODEL,
                  "test_desktop": True, "gateway": gateway_url, "results_dir": str(root), "tasks": tasks,
                  "max_active_tasks": setting, "expected_durations_from": [], "prices": PRICES}
    if setting == AUTO:
        body["auto_max_active_tasks"] = ceiling
    if quota:
        body["quota"] = quota
    if pilot is not None:
        body["forecast_from"] = [str(pilot)]
    return body


def forecast_for(pilot: Path, world: World, at_once: int, auto: bool) -> Forecast:
    """The forecast of a campaign of FORECAST_ATTEMPTS at `at_once` (under `auto`, its ceiling) on the world's
    quota, learned from the pilot run. The fleet is simulated: this host's memory does not bind."""
    prices = {model: ModelPrice.model_validate(price) for model, price in PRICES.items()}
    quota = {label: QuotaLimit.model_validate(limit) for label, limit in world.quota_config().items()}
    campaign = Campaign(attempts=FORECAST_ATTEMPTS, max_active_tasks=at_once, provider="openai", model=MODEL,
                        quota=quota, upstreams=world.labels, upstreams_from="the benchmark's gateway",
                        memory=MemoryFit(at_once, "a simulated fleet"), memory_binds=False, priced=True, auto=auto)
    return make_forecast(read_pilots([pilot], "codex", MODEL, None, prices), campaign)


def run_campaign(root: Path, run_id: str, quota: QuotaSpec | None, plans: dict[str, AttemptPlan],
                 setting: int | str, factor: float, *, ceiling: int = 1, pilot: Path | None = None,
                 horizon: Horizon | None = None, throttled: dict[str, Path] | None = None) -> RunFigures:
    """Run the campaign of `plans` (one repeat per task, retried as the queue retries) at `setting` (a fixed
    max_active_tasks, or "auto" up to `ceiling`) on `quota` (None: no limit), learning from `pilot` (and
    forecast from the `throttled` pilots too); to its end, or measured over `horizon`."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    clock = SimClock(factor)
    at_once = ceiling if setting == AUTO else int(setting)
    with World(quota, clock, run_dir / "gateway-tokens.jsonl") as world:
        forecast = None if pilot is None else forecast_for(pilot, world, at_once, setting == AUTO)
        also = {name: forecast_for(path, world, at_once, setting == AUTO) for name, path in (throttled or {}).items()}
        body = run_config(root, run_id, world.gateway_url, list(plans), setting, ceiling,
                          world.quota_config() or None, pilot)
        fleet = StandInFleet(world, plans, run_id)
        opened: dict[str, float] = {}
        waits_at: list[dict[str, float]] = []

        def open_window() -> None:
            opened["at"] = clock.now()
            waits_at.append(world.waits(f"{run_id}."))

        queue_clock = QueueSimClock(clock) if horizon is None else HorizonClock(clock, horizon, open_window)
        try:
            run_queue(parse_config(body, root / f"{run_id}.json"), executor=fleet, clock=queue_clock,
                      poll_interval_sec=POLL_SEC)
        except KeyboardInterrupt:
            assert horizon is not None, "a campaign without a horizon runs to its end"
        end = clock.now()
        waits_end = world.waits(f"{run_id}.")
        fleet.stop()
    start = opened.get("at", min(a.launched_at for a in fleet.records))
    waited = sum(wait - (waits_at[0].get(scope, 0.0) if waits_at else 0.0) for scope, wait in waits_end.items())
    if horizon is None:
        end = max(a.ended_at for a in fleet.records)
    events = [orjson.loads(line) for line in (run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
    limits = [(float(e["at"]), int(e["limit"])) for e in events if e.get("event") == "limit"]
    return RunFigures(str(setting), fleet.records, start, end, waited, forecast, limits, also)
