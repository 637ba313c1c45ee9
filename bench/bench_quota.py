"""Quota use: valid results per hour and machine time per valid result under a rate-limited model quota, with a fixed
`max_active_tasks` at half, at, twice and four times what the quota serves, and with `"auto"`.

In this process (quota_scenario.py): the real queue (`run_queue`, its admission fixed or "auto" with
hcu.defaults.ADMISSION) and the real gateway (Azure kind), against scripted upstreams that enforce tokens and
requests per minute per deployment as Azure does (hcu/scripted/rate_limits.py: the prompt plus the reserved output
charged at arrival, over a sliding minute; quota A answers 429 with retry-after, quota B a 200 stream that ends in
a rate-limit error). The attempts are stand-ins that hold a simulated guest through boot and setup, an agent phase
whose model calls go through the gateway, and an evaluation; their profile is quota_profile.py's (a median of 30
calls, a screenshot per step in a prompt that carries the whole history, most of it cached, 10 s of model time per
call at the median, 4,096 output tokens reserved per call). A call the gateway answers 429 (its waits reached
`rate_limit_max_wait`) ends the turn; the session resumes after 60 s, at most twice, then the attempt ends
`upstream_rate_limit` and the queue retries it, as run_task does. Time is compressed (1:150, or 1:50 for the quota
that serves tens of attempts at once) for everything that waits: the model, the guests, the gateway's waits, the
limiter's minute, the queue's polls and the admission's holds and windows, which run with their defaults.

Three quotas of the same attempts: A, 450k TPM on one deployment; B, 900k TPM on three resources of two deployments
of 150k each (an attempt keeps its resource, as the gateway places it, and its late steps ask more than 150k a
minute); C, 2.2M TPM on one deployment, about twenty attempts' worth (a large Azure deployment; its fixed settings
stop at twice: eighty stand-ins at once are more than this process answers in time). The bound is the quota over
the tokens one attempt is charged (prompt plus reserved output), in valid results per hour; what the quota serves
at once is the bound times an unthrottled attempt's duration (measured: the same attempts without a quota, at the
quota's compression). Each campaign has more attempts than it can run, is stopped at HORIZON's end and measured
from its start (the first minutes, the admission's start, left out), as a long campaign's steady part: valid
results per hour counts the quota tokens spent on attempts that ended (or may still end) valid, over one attempt's,
so the figure is the share of the quota that went to valid results ("x bound").

Figures per setting: that rate (x the bound); guest-held minutes per valid result, failed attempts' time included
(x an unthrottled attempt's); the share of guest-held time waiting on rate limits (the gateway's waits and the
resume delays); attempts that ended `upstream_rate_limit`; attempts holding a guest on average; and the error of
the campaign forecast (hcu/osworld/quota, learned from a pilot of PILOT_ATTEMPTS attempts at PILOT_AT_ONCE on the
same quota, for a campaign at the same setting) in wall time, tokens and cost per attempt, against what the
campaign measured. Targets for auto: >= 0.9x the bound, <= 1.15x the unthrottled machine time, no
`upstream_rate_limit`.

A second table: the wall-time forecast of each campaign learned from a pilot the quota throttled (THROTTLED_ROUNDS
rounds of attempts at twice and four times what it serves at once, on the same quota, at 1:50; a quota whose fixed
settings stop at twice gets no pilot at four times), against the campaign's measured wall time per valid result:
before (the formula the forecast had: the attempts' whole durations, waits included, over the smaller of the count
and the quota's safe concurrency) and after (the largest of the bounds: the attempts' length less their rate-limit
waits at the count admitted, under auto the safe concurrency; the tokens and the model calls over the quota's rates,
or, for the limit that bound the pilot, over what each resource delivered to it while it refused, where that is less;
the bound taken is named). A quota's
resources keep their ports from run to run, so its pilots and campaigns run on the same upstreams. Figures are
printed, never asserted. On a shared machine runs differ by a few percent: this process's own time per call
(printed; about a twentieth of a step) moves with the machine's load, and the admission's course with it.

    python bench/bench_quota.py [--factor F] [--quotas A,B,C]
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

from bench.quota_profile import MODEL, plan_tasks  # noqa: E402
from bench.quota_scenario import AUTO, Horizon, RunFigures, run_campaign  # noqa: E402
from bench.quota_world import QuotaSpec  # noqa: E402
from hcu.osworld.quota.delivered import per_minute  # noqa: E402
from hcu.osworld.quota.forecast import Forecast  # noqa: E402
from hcu.osworld.quota.profile import read_pilots  # noqa: E402
from hcu.osworld.quota.stats import Range  # noqa: E402

SEED = 20261202
TASKS = 1500
"""More attempts than any setting runs before the horizon: each campaign stands for a long one."""
HORIZON = Horizon(start_sec=25 * 60, stop_sec=75 * 60)
PILOT_ATTEMPTS, PILOT_AT_ONCE = 8, 2
THROTTLED = (2, 4)
"""Pilots the quota throttles: as many attempts at once as these multiples of what it serves."""
THROTTLED_ROUNDS = 2
"""A throttled pilot's attempts, in rounds of as many as it runs at once."""
THROTTLED_FACTOR = 50.0
"""A throttled pilot's time compression, at most: each call it makes is refused several times, and a refused round
trip (some milliseconds of this process's time) stands for a third of a simulated second at 1:50, near an Azure
429's, but for a whole second at 1:150, which no wait in the token log records."""
BASELINE_ATTEMPTS, BASELINE_AT_ONCE = 24, 8
QUOTAS = (QuotaSpec("A", ({"d1": 450_000},), "http"),
          QuotaSpec("B", ({"d1": 150_000, "d2": 150_000},) * 3, "event"),
          QuotaSpec("C", ({"d1": 2_200_000},), "http", factor=50.0, largest_multiple=2))


def error(forecast: Range | None, attempts: int, measured: float) -> str:
    """(forecast - measured) / measured of one attempt's share of a total; `*` when the measured figure lies
    outside the total's 90% prediction interval."""
    if forecast is None or forecast.expected is None or not measured or math.isinf(measured):
        return "-"
    low, high = (None if x is None else x / attempts for x in (forecast.low, forecast.high))
    outside = (low is not None and measured < low) or (high is not None and measured > high)
    return f"{(forecast.expected / attempts / measured - 1) * 100:+.0f}%" + ("*" if outside else " ")


def row(quota: QuotaSpec, label: str, run: RunFigures, charged: float, unthrottled_sec: float) -> str:
    rate, held = run.valid_per_hour(charged), run.held_per_valid_sec(charged)
    forecast = run.forecast
    errors = ["-"] * 3 if forecast is None else [
        error(forecast.wall_time_sec, forecast.attempts, 3600 / rate if rate else 0.0),
        error(forecast.tokens_total, forecast.attempts, run.tokens_per_valid(charged)),
        error(forecast.cost_usd, forecast.attempts, run.cost_per_valid(charged))]
    figures = [f"{rate:5.1f} ({run.quota_share(quota.tpm):4.2f}x)",
               f"{held / 60:5.1f} ({held / unthrottled_sec:4.2f}x)",
               f"{run.wait_share:6.1%}", f"{run.rate_limited:3d}", f"{run.held_sec / (run.end - run.start):5.1f}",
               *(f"{text:>7}" for text in errors)]
    return f"{quota.name:<2}{label:<16}" + "  ".join(figures)


def delivered_note(pilot: Path, quota: QuotaSpec) -> str:
    """What the quota delivered to a pilot it throttled, in the tokens the forecast counts (delivered.py)."""
    delivered = read_pilots([pilot], "codex", MODEL, None, {}).delivered.get(str(pilot))
    if delivered is None:
        return "too few throttled minutes to say what the quota delivered"
    rate = per_minute([delivered], "tpm")
    return (f"delivered {rate / 1000:.0f}k counted tokens a minute over {delivered.minutes} throttled minutes of its "
            f"resources, {rate / quota.tpm:.0%} of its {quota.tpm // 1000}k TPM")


def before(forecast: Forecast) -> Range:
    """The wall time by the formula the forecast had before it took the bounds: the attempts' whole durations
    (their rate-limit waits included) over the smaller of the count and the quota's safe concurrency (exact)."""
    at_once = min(forecast.concurrency or math.inf, forecast.safe_concurrency_exact or math.inf)
    spread = forecast.attempt_sec
    return Range(expected=None if spread is None else spread.mean * forecast.attempts / at_once)


def throttled_row(quota: QuotaSpec, label: str, run: RunFigures, charged: float) -> str:
    """The campaign's measured wall time per valid result, and per throttled pilot the forecast's error before
    and after, and the bound it took."""
    rate = run.valid_per_hour(charged)
    measured = 3600 / rate if rate else 0.0
    cells: list[str] = []
    for multiple in THROTTLED:
        forecast = run.throttled.get(f"{multiple}x")
        cells += ["-"] * 3 if forecast is None else [
            error(before(forecast), forecast.attempts, measured),
            error(forecast.wall_time_sec, forecast.attempts, measured), forecast.wall_time_bound or "-"]
    return f"{quota.name:<2}{label:<16}{measured:6.0f} s " + "".join(f"{cell:>10}" for cell in cells)


def limit_path(run: RunFigures) -> str:
    limits = [limit for _, limit in run.limits]
    changes = [limits[0], *(b for a, b in zip(limits, limits[1:], strict=False) if a != b)]
    return " -> ".join(str(limit) for limit in changes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, help="simulated seconds per real second (default: each quota's)")
    parser.add_argument("--quotas", default=",".join(q.name for q in QUOTAS), help="which quotas, e.g. A,C")
    args = parser.parse_args()
    quotas = [quota.at_fixed_ports() for quota in QUOTAS if quota.name in args.quotas.split(",")]
    logging.getLogger("hcu.gateway").setLevel(logging.ERROR)  # its rate-limit waits are the point here
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # calls cut by the horizon
    began, cpu = time.time(), time.process_time()
    plans = plan_tasks("t", TASKS, SEED)
    charged = statistics.fmean(plan.charged_tokens for plan in plans.values())
    print(f"measured from {HORIZON.start_sec / 60:.0f} to {HORIZON.stop_sec / 60:.0f} simulated minutes of each "
          f"campaign; {quota_lines(quotas, args.factor)}")
    lines, notes, throttled_lines = [], [], []
    unthrottled_at: dict[float, float] = {}
    with tempfile.TemporaryDirectory(prefix="hcu-bench-quota-") as tmp:
        root = Path(tmp)
        for quota in quotas:
            factor = args.factor or quota.factor
            if factor not in unthrottled_at:
                baseline = run_campaign(root, f"unthrottled-{factor:g}", None,
                                        dict(list(plans.items())[:BASELINE_ATTEMPTS]), BASELINE_AT_ONCE, factor)
                per_call = (sum(a.held_sec - plans[a.key].unthrottled_sec for a in baseline.attempts)
                            / sum(len(plans[a.key].calls) for a in baseline.attempts))
                unthrottled_at[factor] = statistics.fmean(p.unthrottled_sec + per_call * len(p.calls)
                                                          for p in plans.values())
                notes.append(f"one attempt at 1:{factor:g}: {charged / 1e6:.2f}M tokens charged (prompt + reserved "
                             f"output), unthrottled {unthrottled_at[factor] / 60:.1f} min held, of which "
                             f"{per_call:.2f} s per call is the gateway's and this process's time (measured without a "
                             "quota)")
            unthrottled = unthrottled_at[factor]
            bound = quota.tpm * 60 / charged
            served = round(bound * unthrottled / 3600)
            pilot = run_campaign(root, f"{quota.name}-pilot", quota, plan_tasks("p", PILOT_ATTEMPTS, SEED + 1),
                                 PILOT_AT_ONCE, factor)
            notes.append(f"quota {quota.name}: bound {bound:.1f} valid/h, serves {served} at once; pilot "
                         f"{PILOT_ATTEMPTS} attempts at {PILOT_AT_ONCE}: {pilot.valid_ended} valid, waits "
                         f"{pilot.wait_share:.1%}")
            throttled = {}
            for multiple in (m for m in THROTTLED if m <= quota.largest_multiple):
                at_once, name = multiple * served, f"{quota.name}-pilot-{multiple}x"
                throttled_pilot = run_campaign(root, name, quota, plan_tasks(
                    f"q{multiple}x", THROTTLED_ROUNDS * at_once, SEED + 1 + multiple), at_once,
                    args.factor or min(factor, THROTTLED_FACTOR))
                throttled[f"{multiple}x"] = root / name
                notes.append(f"quota {quota.name}: pilot {THROTTLED_ROUNDS * at_once} attempts at {at_once} "
                             f"({multiple}x, time 1:{args.factor or min(factor, THROTTLED_FACTOR):g}): "
                             f"{throttled_pilot.valid_ended} valid, waits "
                             f"{throttled_pilot.wait_share:.1%}, {throttled_pilot.rate_limited} ended "
                             f"upstream_rate_limit; {delivered_note(root / name, quota)}")
            fixed = [(max(1, served // 2), "half"), (served, "at"), (2 * served, "twice"), (4 * served, "four times")]
            fixed = [(count, label) for count, label in fixed if count <= quota.largest_multiple * served]
            for setting, label in [*fixed, (AUTO, "auto")]:
                run = run_campaign(root, f"{quota.name}-{setting}", quota, plans, setting, factor,
                                   ceiling=4 * served, pilot=root / f"{quota.name}-pilot", horizon=HORIZON,
                                   throttled=throttled)
                name = f"{setting} ({label})" if setting != AUTO else f"auto (<= {4 * served})"
                lines.append(row(quota, name, run, charged, unthrottled))
                throttled_lines.append(throttled_row(quota, name, run, charged))
                if setting == AUTO and run.forecast is not None:
                    notes.append(f"quota {quota.name} auto: limits {limit_path(run)}, {run.mean_limit:.1f} on "
                                 f"average; forecast safe concurrency {run.forecast.safe_concurrency_exact}")
                notes += [f"quota {quota.name} {name}: {crash}" for crash in run.crashed[:3]]
    print(f"{'':<18}{'valid/h (x bound)':<19}{'machine (x)':<14}{'waits':>6}  {'rl':>3}  {'held':>5}  "
          f"{'wall':>7}  {'tokens':>7}  {'cost':>7}")
    print("\n".join(lines))
    print("(valid/h: valid results per simulated hour, x the quota's bound; machine: guest-held minutes per valid "
          "result, x an unthrottled attempt's;\n waits: share of guest-held time waiting on rate limits; rl: "
          "attempts ended upstream_rate_limit; held: attempts holding a guest, on average;\n wall, tokens, cost: "
          "the forecast's error per attempt, (forecast - measured) / measured, * outside its 90% interval)")
    columns = "".join(f"{f'{multiple}x before':>10}{'after':>10}{'bound':>10}" for multiple in THROTTLED)
    print(f"\n{'':<18}{'measured':>8} {columns}")
    print("\n".join(throttled_lines))
    print("(measured: simulated seconds of the campaign per valid result; per pilot throttled at 2x and 4x what the "
          "quota serves,\n the wall-time forecast's error per attempt before and after, * outside its 90% interval, "
          "and the bound the expected value took)")
    print("\n".join(notes))
    print(f"benchmark: {time.time() - began:.0f} s wall, {time.process_time() - cpu:.0f} s CPU; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def quota_lines(quotas: list[QuotaSpec], factor: float | None) -> str:
    return "; ".join(f"{quota.describe()} ({quota.stream_refusal} refusals, time 1:{factor or quota.factor:g})"
                     for quota in quotas)


if __name__ == "__main__":
    sys.exit(main())
