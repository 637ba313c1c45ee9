"""One run of bench_quota.py's scenario: a campaign of stand-in attempts (quota_fleet.py) under the real queue
(`run_queue`, with its admission, fixed or "auto") through the real gateway against a scripted quota
(quota_world.py), on simulated time; its figures; and the campaign forecast (hcu/osworld/quota) of the same
campaign from a pilot run, to set against them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.quota_fleet import AttemptRecord, StandInFleet
from bench.quota_profile import MODEL, PRICES, AttemptPlan
from bench.quota_world import QueueSimClock, QuotaSpec, SimClock, World
from hcu.osworld.queue.config import parse_config
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.quota.forecast import Campaign, Forecast, MemoryFit, make_forecast
from hcu.osworld.quota.limits import QuotaLimit
from hcu.osworld.quota.profile import read_pilots
from hcu.osworld.records.cost import ModelPrice

AUTO = "auto"
POLL_SEC = 5.0
"""The queue's poll, simulated seconds (its default)."""


@dataclass(frozen=True)
class RunFigures:
    """What one campaign came to (simulated seconds)."""

    setting: str
    attempts: list[AttemptRecord]
    forecast: Forecast | None
    limits: list[int]
    """Under auto: every limit the rule set, in order."""

    @property
    def valid(self) -> int:
        return sum(a.outcome == "valid" for a in self.attempts)

    @property
    def rate_limited(self) -> int:
        return sum(a.outcome == "upstream_rate_limit" for a in self.attempts)

    @property
    def crashed(self) -> list[str]:
        return [a.outcome for a in self.attempts if a.outcome.startswith("crashed")]

    @property
    def wall_sec(self) -> float:
        """First launch to the last attempt's end."""
        return max(a.ended_at for a in self.attempts) - min(a.launched_at for a in self.attempts)

    @property
    def valid_per_hour(self) -> float:
        return self.valid * 3600 / self.wall_sec

    @property
    def held_per_valid_sec(self) -> float:
        """Guest-held seconds of every attempt, failed ones included, per valid result."""
        return sum(a.held_sec for a in self.attempts) / max(1, self.valid)

    @property
    def wait_share(self) -> float:
        """Of the attempts' guest-held time, the share spent waiting on rate limits (the gateway's waits and the
        resume delays after a rate-limited turn)."""
        held = sum(a.held_sec for a in self.attempts)
        return sum(a.gateway_wait_sec + a.resume_wait_sec for a in self.attempts) / held if held else 0.0

    @property
    def tokens(self) -> int:
        """Tokens as the forecast counts them (input, cached included, plus output), failed attempts included."""
        return sum(a.tokens for a in self.attempts)

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.attempts)

    @property
    def mean_held_sec(self) -> float:
        return statistics.fmean(a.held_sec for a in self.attempts)


def run_config(root: Path, run_id: str, gateway_url: str, tasks: list[str], setting: int | str, ceiling: int,
               quota: dict[str, dict[str, int]] | None, pilot: Path | None) -> dict:
    """The campaign's run config (as a user writes it)."""
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


def forecast_for(pilot: Path, world: World, attempts: int, at_once: int) -> Forecast:
    """The forecast of a campaign of `attempts` at `at_once` on the world's quota, learned from the pilot run.
    The fleet is simulated: this host's memory does not bind."""
    prices = {model: ModelPrice.model_validate(price) for model, price in PRICES.items()}
    sample = read_pilots([pilot], "codex", MODEL, None, prices)
    quota = {label: QuotaLimit.model_validate(limit) for label, limit in world.quota_config().items()}
    campaign = Campaign(attempts=attempts, max_active_tasks=at_once, provider="openai", model=MODEL, quota=quota,
                        upstreams=world.labels, upstreams_from="the benchmark's gateway",
                        memory=MemoryFit(at_once, "simulated fleet"), memory_binds=False, priced=True)
    return make_forecast(sample, campaign)


def run_campaign(root: Path, run_id: str, quota: QuotaSpec | None, plans: dict[str, AttemptPlan],
                 setting: int | str, factor: float, *, ceiling: int = 1, pilot: Path | None = None) -> RunFigures:
    """Run the campaign of `plans` (one attempt per task, retries as the queue makes them) at `setting` (a
    fixed max_active_tasks or "auto" up to `ceiling`) on `quota` (None: no limit), learning from `pilot`."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    clock = SimClock(factor)
    with World(quota, clock, run_dir / "gateway-tokens.jsonl") as world:
        at_once = ceiling if setting == AUTO else int(setting)
        forecast = forecast_for(pilot, world, len(plans), at_once) if pilot is not None else None
        body = run_config(root, run_id, world.gateway_url, list(plans), setting, ceiling,
                          world.quota_config() or None, pilot)
        fleet = StandInFleet(world, plans, run_id)
        run_queue(parse_config(body, root / f"{run_id}.json"), executor=fleet, clock=QueueSimClock(clock),
                  poll_interval_sec=POLL_SEC)
    limits = [event["limit"] for event in _events(run_dir) if event.get("event") == "limit"]
    return RunFigures(str(setting), fleet.records, forecast, limits if setting == AUTO else [])


def _events(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "logs" / "queue.jsonl").read_bytes().splitlines()]
