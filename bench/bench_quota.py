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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the scenario's modules beside this one

from bench.quota_profile import plan_tasks  # noqa: E402
from bench.quota_scenario import AUTO, Horizon, RunFigures, run_campaign  # noqa: E402
from bench.quota_world import QuotaSpec  # noqa: E402

FACTOR = 150.0
"""Simulated seconds per real second."""
SEED = 20261202
TASKS = 600
"""More attempts than any setting runs before the horizon: each campaign stands for a long one."""
HORIZON = Horizon(start_sec=25 * 60, stop_sec=75 * 60)
PILOT_ATTEMPTS, PILOT_AT_ONCE = 8, 2
BASELINE_ATTEMPTS, BASELINE_AT_ONCE = 24, 8
QUOTAS = (QuotaSpec("A", ({"d1": 450_000},), "http"),
          QuotaSpec("B", ({"d1": 150_000, "d2": 150_000},) * 3, "event"))


def error(forecast: float | None, measured: float) -> str:
    return "-" if forecast is None or not measured else f"{(forecast / measured - 1) * 100:+.0f}%"


def row(quota: QuotaSpec, label: str, run: RunFigures, charged: float, unthrottled_sec: float) -> str:
    wall = tokens = cost = None
    if (forecast := run.forecast) is not None:
        per = 1 / forecast.attempts
        wall, tokens, cost = (None if x is None else x * per for x in (
            forecast.wall_time_sec.expected, forecast.tokens_total.expected, forecast.cost_usd.expected))
    rate, held = run.valid_per_hour(charged), run.held_per_valid_sec(charged)
    figures = [f"{rate:5.1f} ({run.quota_share(quota.tpm):4.2f}x)",
               f"{held / 60:5.1f} ({held / unthrottled_sec:4.2f}x)",
               f"{run.wait_share:6.1%}", f"{run.rate_limited:3d}", f"{run.held_sec / (run.end - run.start):5.1f}",
               f"{error(wall, 3600 / rate if rate else 0.0):>6}", f"{error(tokens, run.tokens_per_valid(charged)):>6}",
               f"{error(cost, run.cost_per_valid(charged)):>6}"]
    return f"{quota.name:<2}{label:<16}" + "  ".join(figures)


def limit_path(run: RunFigures) -> str:
    limits = [limit for _, limit in run.limits]
    changes = [limits[0], *(b for a, b in zip(limits, limits[1:], strict=False) if a != b)]
    return " -> ".join(str(limit) for limit in changes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=FACTOR, help="simulated seconds per real second")
    args = parser.parse_args()
    logging.getLogger("hcu.gateway").setLevel(logging.ERROR)  # its rate-limit waits are the point here
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # calls cut by the horizon
    began, cpu = time.time(), time.process_time()
    plans = plan_tasks("t", TASKS, SEED)
    charged = statistics.fmean(plan.charged_tokens for plan in plans.values())
    print(f"time compressed 1:{args.factor:g}; measured from {HORIZON.start_sec / 60:.0f} to "
          f"{HORIZON.stop_sec / 60:.0f} simulated minutes of each campaign; {quota_lines()}")
    lines, notes = [], []
    with tempfile.TemporaryDirectory(prefix="hcu-bench-quota-") as tmp:
        root = Path(tmp)
        baseline = run_campaign(root, "unthrottled", None, dict(list(plans.items())[:BASELINE_ATTEMPTS]),
                                BASELINE_AT_ONCE, args.factor)
        per_call = (sum(a.held_sec - plans[a.key].unthrottled_sec for a in baseline.attempts)
                    / sum(len(plans[a.key].calls) for a in baseline.attempts))
        unthrottled = statistics.fmean(p.unthrottled_sec + per_call * len(p.calls) for p in plans.values())
        notes.append(f"one attempt: {charged / 1e6:.2f}M tokens charged (prompt + reserved output), unthrottled "
                     f"{unthrottled / 60:.1f} min held, of which {per_call:.1f} s per call is the gateway's and this "
                     f"process's time at this compression (measured without a quota)")
        for quota in QUOTAS:
            bound = quota.tpm * 60 / charged
            served = round(bound * unthrottled / 3600)
            pilot = run_campaign(root, f"{quota.name}-pilot", quota, plan_tasks("p", PILOT_ATTEMPTS, SEED + 1),
                                 PILOT_AT_ONCE, args.factor)
            notes.append(f"quota {quota.name}: bound {bound:.1f} valid/h, serves {served} at once; pilot "
                         f"{PILOT_ATTEMPTS} attempts at {PILOT_AT_ONCE}: {pilot.valid_ended} valid, waits "
                         f"{pilot.wait_share:.1%}")
            for setting, label in ((max(1, served // 2), "half"), (served, "at"), (2 * served, "twice"),
                                   (4 * served, "four times"), (AUTO, "auto")):
                run = run_campaign(root, f"{quota.name}-{setting}", quota, plans, setting, args.factor,
                                   ceiling=4 * served, pilot=root / f"{quota.name}-pilot", horizon=HORIZON)
                name = f"{setting} ({label})" if setting != AUTO else f"auto (<= {4 * served})"
                lines.append(row(quota, name, run, charged, unthrottled))
                if setting == AUTO and run.forecast is not None:
                    notes.append(f"quota {quota.name} auto: limits {limit_path(run)}, {run.mean_limit:.1f} on "
                                 f"average; forecast safe concurrency {run.forecast.safe_concurrency_exact}")
                notes += [f"quota {quota.name} {name}: {crash}" for crash in run.crashed[:3]]
    print(f"{'':<18}{'valid/h (x bound)':<19}{'machine (x)':<14}{'waits':>6}  {'rl':>3}  {'held':>5}  "
          f"{'wall':>6}  {'tokens':>6}  {'cost':>6}")
    print("\n".join(lines))
    print("(valid/h: valid results per simulated hour, x the quota's bound; machine: guest-held minutes per valid "
          "result, x an unthrottled attempt's;\n waits: share of guest-held time waiting on rate limits; rl: "
          "attempts ended upstream_rate_limit; held: attempts holding a guest, on average;\n wall, tokens, cost: "
          "the forecast's error per attempt, (forecast - measured) / measured)")
    print("\n".join(notes))
    print(f"benchmark: {time.time() - began:.0f} s wall, {time.process_time() - cpu:.0f} s CPU; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def quota_lines() -> str:
    return "; ".join(quota.describe() + f" ({quota.stream_refusal} refusals)" for quota in QUOTAS)


if __name__ == "__main__":
    sys.exit(main())
