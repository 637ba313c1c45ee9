"""Quota use: valid results per hour and machine time per valid result under a rate-limited model quota, with a
fixed `max_active_tasks` at half, at, twice and four times what the quota serves, and with `"auto"`.

In this process (quota_scenario.py): the real queue (`run_queue`, its admission fixed or "auto" with
hcu.defaults.ADMISSION) and the real gateway, against scripted upstreams that enforce tokens and requests per
minute per deployment as Azure does (the prompt plus the reserved output charged at arrival; quota A answers 429
with retry-after, quota B a 200 stream that ends in a rate-limit error). The attempts are stand-ins that hold a
simulated guest and make the model calls of a computer-use attempt through the gateway (quota_profile.py: tens of
calls, a screenshot per step in a growing, mostly cached prompt, seconds of model time per call). Time is
compressed 1:FACTOR for everything that waits, the admission's holds and windows included.

Two quotas, 450k TPM in all on one deployment (A) and 900k TPM on three resources of two deployments each (B).
What a quota serves, N: its bound in attempts per hour (quota TPM x 60 / tokens one attempt is charged, prompt
plus reserved output) times an unthrottled attempt's duration (measured: the same attempts with no quota).
Each setting runs the same campaign of ATTEMPTS_PER_SERVED x N attempts.

Figures per setting: valid results per hour (x the bound), guest-held seconds per valid result (x an unthrottled
attempt's, failed attempts' time included), the share of guest-held time waiting on rate limits (the gateway's
waits and the resume delays), attempts that ended `upstream_rate_limit`, and the campaign forecast's error (learned
from a pilot of PILOT_ATTEMPTS attempts at PILOT_AT_ONCE on the same quota, for the same campaign and setting;
(forecast - measured) / measured) for wall time, tokens and cost. Targets for auto: >= 0.9x the bound, <= 1.15x
the unthrottled machine time, no `upstream_rate_limit`. Figures are printed, never asserted.

    python bench/bench_quota.py [--factor F] [--per-served K]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the scenario's modules beside this one

from bench.quota_profile import AttemptPlan, plan_tasks  # noqa: E402
from bench.quota_scenario import AUTO, RunFigures, run_campaign  # noqa: E402
from bench.quota_world import QuotaSpec  # noqa: E402

FACTOR = 150.0
"""Simulated seconds per real second."""
SEED = 20261202
ATTEMPTS_PER_SERVED = 6
PILOT_ATTEMPTS, PILOT_AT_ONCE = 8, 2
BASELINE_AT_ONCE = 8
QUOTAS = (QuotaSpec("A", ({"d1": 450_000},), "http"),
          QuotaSpec("B", ({"d1": 150_000, "d2": 150_000},) * 3, "event"))


def mean_charged(plans: dict[str, AttemptPlan]) -> float:
    return statistics.fmean(plan.charged_tokens() for plan in plans.values())


def error(forecast: float | None, measured: float) -> str:
    return "-" if forecast is None or not measured else f"{(forecast / measured - 1) * 100:+.0f}%"


def row(quota: str, label: str, run: RunFigures, bound: float, unthrottled_sec: float) -> str:
    forecast = run.forecast
    wall = tokens = cost = None
    if forecast is not None:
        wall, tokens, cost = (forecast.wall_time_sec.expected, forecast.tokens_total.expected,
                              forecast.cost_usd.expected)
    figures = [f"{run.valid_per_hour:6.1f} ({run.valid_per_hour / bound:4.2f}x)",
               f"{run.held_per_valid_sec / 60:6.1f} ({run.held_per_valid_sec / unthrottled_sec:4.2f}x)",
               f"{run.wait_share:6.1%}", f"{run.rate_limited:5d}", f"{error(wall, run.wall_sec):>6}",
               f"{error(tokens, run.tokens):>6}", f"{error(cost, run.cost_usd):>6}"]
    return f"{quota:<2}{label:<14}" + "  ".join(figures)


def limit_path(run: RunFigures) -> str:
    changes = [run.limits[0], *(b for a, b in zip(run.limits, run.limits[1:], strict=False) if a != b)]
    return " -> ".join(str(limit) for limit in changes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=FACTOR, help="simulated seconds per real second")
    parser.add_argument("--per-served", type=int, default=ATTEMPTS_PER_SERVED,
                        help="attempts per campaign, per attempt the quota serves at once")
    args = parser.parse_args()
    logging.getLogger("hcu.gateway").setLevel(logging.ERROR)  # its rate-limit waits are the point here
    began, cpu = time.time(), time.process_time()
    plans = plan_tasks("t", args.per_served * most_served(plan_tasks("t", 100, SEED)), SEED)
    pilot_plans = plan_tasks("p", PILOT_ATTEMPTS, SEED + 1)
    print(f"time compressed 1:{args.factor:g}; {quota_lines()}")
    lines, notes = [], []
    with tempfile.TemporaryDirectory(prefix="hcu-bench-quota-") as tmp:
        root = Path(tmp)
        baseline = run_campaign(root, "unthrottled", None, plans, BASELINE_AT_ONCE, args.factor)
        held = {record.key: record.held_sec for record in baseline.attempts}
        for quota in QUOTAS:
            bound_all = quota.tpm * 60 / mean_charged(plans)
            served = round(bound_all * statistics.fmean(held.values()) / 3600)
            chosen = dict(list(plans.items())[:args.per_served * served])
            bound = quota.tpm * 60 / mean_charged(chosen)
            unthrottled = statistics.fmean(held[key] for key in chosen)
            pilot = run_campaign(root, f"{quota.name}-pilot", quota, pilot_plans, PILOT_AT_ONCE, args.factor)
            notes.append(f"quota {quota.name}: serves {served} at once; {len(chosen)} attempts, bound "
                         f"{bound:.1f} valid/h ({mean_charged(chosen) / 1e6:.2f}M tokens charged per attempt), "
                         f"unthrottled attempt {unthrottled / 60:.1f} min; pilot: {pilot.valid} valid of "
                         f"{len(pilot.attempts)}, waits {pilot.wait_share:.1%}")
            for setting, label in ((max(1, served // 2), "half"), (served, "at"), (2 * served, "twice"),
                                   (4 * served, "four times"), (AUTO, "auto")):
                run = run_campaign(root, f"{quota.name}-{setting}", quota, chosen, setting, args.factor,
                                   ceiling=4 * served, pilot=root / f"{quota.name}-pilot")
                name = f"{setting} ({label})" if setting != AUTO else f"auto (<= {4 * served})"
                lines.append(row(quota.name, name, run, bound, unthrottled))
                if setting == AUTO and run.forecast is not None:
                    notes.append(f"quota {quota.name} auto: limits {limit_path(run)}; forecast safe concurrency "
                                 f"{run.forecast.safe_concurrency} ({run.forecast.binding})")
                notes += [f"quota {quota.name} {name}: {crash}" for crash in run.crashed[:3]]
    print(f"{'':<16}{'valid/h (x bound)':<20}{'machine/valid':<17}{'waits':>6}  {'rl':>5}  "
          f"{'wall':>6}  {'tokens':>6}  {'cost':>6}")
    print("\n".join(lines))
    print("(valid/h and the bound in simulated hours; machine/valid: guest-held minutes per valid result, x an "
          "unthrottled attempt's;\n waits: share of guest-held time waiting on rate limits; rl: attempts ended "
          "upstream_rate_limit; wall, tokens, cost: the forecast's error, (forecast - measured) / measured)")
    print("\n".join(notes))
    print(f"benchmark: {time.time() - began:.0f} s wall, {time.process_time() - cpu:.0f} s CPU; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def most_served(sample: dict[str, AttemptPlan]) -> int:
    """An upper estimate of the most attempts a quota serves at once (the unthrottled campaign runs that many
    campaigns' attempts): planned durations with a quarter more for the gateway's and the queue's time."""
    duration = statistics.fmean(plan.unthrottled_sec for plan in sample.values()) * 1.25
    return math.ceil(max(quota.tpm for quota in QUOTAS) * 60 / mean_charged(sample) * duration / 3600)


def quota_lines() -> str:
    return "; ".join(quota.describe() + f" ({quota.stream_refusal} refusals)" for quota in QUOTAS)


if __name__ == "__main__":
    sys.exit(main())
