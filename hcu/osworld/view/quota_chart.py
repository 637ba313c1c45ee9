"""The run page's chart over the run's time (timeline.py reads it): running attempts, the admission limit and the
attempts waiting on rate limits in one panel, tokens per minute against the quota in another below it, on the same
time axis. Drawn by plots.py's series over time; a panel with nothing to draw says why instead."""

from __future__ import annotations

from hcu.osworld.quota.profile import COUNTED_TOKENS
from hcu.osworld.view.data import RunData, RunIndex
from hcu.osworld.view.html import absent
from hcu.osworld.view.plots import ACCENT, HIGHLIGHT, Series, clock, series_chart
from hcu.osworld.view.svg import DIM, INK
from hcu.osworld.view.timeline import QuotaLine, Timeline, quota_line, run_provider

X_LABEL = "time since the run's first event"


def attempts(v: float) -> str:
    return f"{v:.3g}"


def tokens(v: float) -> str:
    """Tokens per minute on the axis: 12k, 1.5M."""
    return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v >= 1e3 else f"{v:g}"


def _bins(t: Timeline) -> str:
    return f"{t.bin_minutes}-minute bin" if t.bin_minutes > 1 else "minute"


def attempts_chart(t: Timeline) -> str:
    events = t.events
    series = []
    if t.has_events:
        series.append(Series("running attempts", t.running, colour=INK))
        if t.limit:
            series.append(Series("admission limit", t.limit, colour=ACCENT))
    if t.has_token_log:
        series += [Series("rate-limit waits", t.waiting, colour=HIGHLIGHT),
                   Series("waits, no valid result", t.waiting_wasted, colour=DIM)]
    queue = (f"running attempts from logs/queue.jsonl (+1 at each of {events['launch']} launches and "
             f"{events['adopt']} adoptions, -1 at each of {events['exit']} exits, 0 at each of {events['start']} "
             "queue starts)" + (f" and the admission limit of its {events['limit']} limit events" if t.limit else
                                 "; the log has no limit events (a queue from before they were written)")
             if t.has_events else "no logs/queue.jsonl: running attempts and the admission limit are unknown")
    waits = (f"the attempts waiting on rate limits on average over each {_bins(t)} ({t.wait_sec:,.0f} s waited over "
             f"the run, {t.wait_wasted_sec:,.0f} s of it in attempts that gave no valid result), from the token log"
             if t.has_token_log else "no token log: the rate-limit waits are unknown")
    return series_chart("chart-quota-attempts", "Attempts over the run's time", f"Over {clock(t.span)}: {queue}; "
                        f"{waits}.", series, x_label=X_LABEL, y_label="attempts", y_fmt=attempts, span=(0.0, t.span))


def tokens_chart(t: Timeline, quota: QuotaLine, provider: str) -> str:
    series = [Series("tokens per minute", t.tokens, colour=INK),
              Series("no valid result", t.tokens_wasted, colour=HIGHLIGHT)]
    if quota.tpm is not None:
        series.append(Series(quota.name, [(0.0, float(quota.tpm)), (t.span, float(quota.tpm))], colour=ACCENT))
    counted = COUNTED_TOKENS.get(provider, "input + output")
    description = (f"Tokens per minute as a tokens-per-minute quota counts them ({counted}), averaged over each "
                   f"{_bins(t)}: all {t.requests:,} requests of the run's attempts in the token log ({t.token_total:,} "
                   f"tokens) and those of the attempts that gave no valid result ({t.token_wasted:,} tokens); "
                   f"{quota.detail}.")
    return series_chart("chart-quota-tokens", "Tokens per minute against the quota", description, series,
                        x_label=X_LABEL, y_label="tokens per minute", y_fmt=tokens, tip_fmt=lambda v: f"{v:,.0f}",
                        span=(0.0, t.span))


def quota_charts(run: RunData, index: RunIndex) -> str:
    """Both panels, or why there is nothing to draw."""
    t = run.timeline(index)
    if t is None:
        return absent("No logs/queue.jsonl and no token log of this run: nothing to draw over its time.")
    quota = quota_line(run.config, run.manifest())
    body = attempts_chart(t)
    if t.has_token_log:
        body += tokens_chart(t, quota, run_provider(run.config) or "")
        if quota.tpm is None:
            body += absent(quota.detail[0].upper() + quota.detail[1:] + ".")
    else:
        body += absent("No token log (gateway-tokens.jsonl): tokens per minute are unknown.")
    return body
