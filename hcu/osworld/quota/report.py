"""The forecast in words: the dry run's section and QUEUE_STATUS.md's lines."""

from __future__ import annotations

from hcu.osworld.quota.forecast import Forecast
from hcu.osworld.quota.stats import Range, Spread


def amount(value: float) -> str:
    """1234567 -> 1.23M, 45600 -> 45.6k, 812 -> 812, 41.333 -> 41.3, 2.6 -> 2.6."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}" if value == int(value) or abs(value) >= 100 else f"{value:.3g}"


def span(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, minutes = seconds // 3600, seconds // 60 % 60
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds % 60:02d}s"


def usd(value: float) -> str:
    return f"{value:.2f}"


def ranged(total: Range, show=amount, unit: str = "") -> str:
    """`expected (low to high)`, or what is missing of it."""
    if total.expected is None:
        return "unknown"
    if total.low is None or total.high is None:
        return f"{show(total.expected)}{unit} (no range)"
    return f"{show(total.expected)}{unit} ({show(total.low)} to {show(total.high)})"


def spread_text(figure: Spread | None, show=amount) -> str:
    return "unknown" if figure is None else f"median {show(figure.median)}, p90 {show(figure.p90)}"


def plan_lines(forecast: Forecast) -> list[str]:
    """The forecast section of `run_queue --dry-run`."""
    f = forecast
    done = "" if f.attempts_done is None else f" ({f.attempts_done} final in the run directory already)"
    lines = [f"forecast (totals as expected value and 90% prediction interval; tokens are those a quota counts: "
             f"{f.counted_tokens}):",
             f"  attempts to run: {f.attempts}{done}",
             f"  learned from: {f.sample_attempts} attempts", *[f"    {source}" for source in f.sources],
             f"  one attempt: tokens {spread_text(f.tokens_per_attempt)}; model calls "
             f"{spread_text(f.calls_per_attempt)}; agent phase {spread_text(f.agent_phase_sec, span)}; whole attempt "
             f"{spread_text(f.attempt_sec, span)}",
             f"  one running attempt: tokens per minute {spread_text(f.tokens_per_minute_per_attempt)}; model calls "
             f"per minute {spread_text(f.calls_per_minute_per_attempt)}"]
    for domain, profile in f.by_domain.items():
        lines.append(f"  domain {domain} ({profile.attempts} attempts): tokens "
                     f"{spread_text(profile.tokens_per_attempt)}; model calls "
                     f"{spread_text(profile.calls_per_attempt)}; agent phase "
                     f"{spread_text(profile.agent_phase_sec, span)}")
    quota = "; ".join(f"{metric} {amount(cap.per_minute)} ({cap.of})" for metric, cap in f.quota.items() if cap)
    upstreams = ", ".join(f.upstreams) if f.upstreams is not None else "unknown"
    lines += [f"  quota: {quota or 'none'}; gateway upstreams: {upstreams} ({f.upstreams_from})",
              f"  quota from: {f.quota_from}",
              "  safe concurrency: " + ("unknown" if f.safe_concurrency is None else
                                        f"{f.safe_concurrency} attempts at once ({f.safe_concurrency_exact}; "
                                        f"binding: {f.binding}; at {f.safe_concurrency} an attempt waits "
                                        f"{f.safe_concurrency_wait_share:.0%} of its agent phase)"),
              "  memory concurrency: " + ("unknown" if f.memory_concurrency is None else
                                          f"{f.memory_concurrency} attempts at once") + f" ({f.memory})"]
    lines += [f"  tokens total: {ranged(f.tokens_total)}",
              f"  model calls total: {ranged(f.calls_total)}",
              f"  wall time: {ranged(f.wall_time_sec, span)}{bound_text(f)}",
              *(["    bounds: " + "; ".join(f"{b.of} {ranged(b.wall_time_sec, span)}"
                                           for b in f.wall_time_bounds.values())] if f.wall_time_bounds else []),
              f"  cost: {ranged(f.cost_usd, usd, ' USD')}",
              *[f"  unknown: {line}" for line in f.unknown], *[f"  note: {line}" for line in f.notes]]
    return lines


def bound_of(forecast: Forecast) -> str | None:
    """What the expected wall time is bound by, in words (None: unknown)."""
    bound = forecast.wall_time_bounds.get(forecast.wall_time_bound or "")
    return None if bound is None else bound.of


def bound_text(forecast: Forecast) -> str:
    return "" if (of := bound_of(forecast)) is None else f", bound by {of}"


def status_lines(forecast: Forecast, running: int, own: int) -> list[str]:
    """QUEUE_STATUS.md's forecast: ETA, what is still to go, and what it is learned from."""
    f = forecast
    rate = f.tokens_per_minute_per_attempt
    learned = (f"Forecast from {f.sample_attempts} attempts ({own} of this run, {f.sample_attempts - own} of "
               "forecast_from)")
    if rate is not None:
        learned += f"; one running attempt {amount(rate.median)} tokens/min median, {amount(rate.p90)} p90"
    if f.safe_concurrency is not None:
        learned += f"; safe concurrency {f.safe_concurrency} ({f.binding})"
    return [f"ETA: {ranged(f.wall_time_sec, span)}{bound_text(f)}.",
            f"To go: {f.attempts} attempts ({running} running, counted whole): tokens {ranged(f.tokens_total)}, "
            f"model calls {ranged(f.calls_total)}, cost {ranged(f.cost_usd, usd, ' USD')}.",
            learned + ".", f"Quota: {f.quota_from}."]
