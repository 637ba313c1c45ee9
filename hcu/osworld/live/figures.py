"""A running queue's figures in words, from its snapshot (queue/snapshot.py): what the terminal view, the
plain-line log's summary, `ctl status` and the viewer's live section show, each line the same everywhere."""

from __future__ import annotations

import time

from hcu.osworld.live.score import score_text
from hcu.osworld.queue.snapshot import FinishFigure, QueueSnapshot
from hcu.osworld.queue.status import control_word
from hcu.osworld.quota.report import amount, ranged, span, usd

STATE_WORDS = {"running": "running", "paused": "running, launches paused", "draining": "draining",
               "stopping": "launches stopped, attempts finishing", "done": "done", "drained": "drained",
               "stopped": "stopped", "interrupted": "queue stopped, attempts left running"}


def clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def progress_text(s: QueueSnapshot) -> str:
    finished, exhausted = s.final.get("finished", 0), s.final.get("exhausted", 0)
    out = f", {exhausted} out of attempts" if exhausted else ""
    return (f"{s.done} of {s.planned} repeats final ({finished} finished{out}); {s.running} running, "
            f"{s.pending} to start")


def phases_text(s: QueueSnapshot) -> str:
    return " · ".join(f"{phase} {count}" for phase, count in sorted(s.phases.items())) or "none"


def tokens_text(s: QueueSnapshot) -> str:
    to_go = f"; to go {ranged(s.forecast.tokens_to_go)}" if s.forecast else ""
    return f"{amount(s.tokens)} so far{to_go}"


def cost_text(s: QueueSnapshot) -> str:
    if s.spend_usd is None:
        return "unknown (the config has no prices)"
    ceiling = s.settings.get("max_cost_usd")
    limit = f" of max_cost_usd {usd(ceiling)}" if isinstance(ceiling, (int, float)) else ""
    to_go = f"; to go {ranged(s.forecast.cost_to_go, usd, ' USD')}" if s.forecast else ""
    return f"{usd(s.spend_usd)} USD so far{limit}{to_go}"


def eta_text(s: QueueSnapshot) -> str:
    if s.forecast is None:
        return "unknown"
    f = s.forecast
    return f"{ranged(f.eta, span)}" + ("" if f.bound is None else f", bound by {f.bound}")


def admission_text(s: QueueSnapshot) -> str:
    slots = "" if s.slots is None or s.slots >= s.limit else f"; the executor holds {s.slots} now"
    return f"{s.limit} at once ({s.limit_reason}){slots}"


def launches_text(s: QueueSnapshot) -> str:
    if word := control_word(s):
        return word
    return s.held or ("none left to start" if not s.pending else "going")


def rate_limit_text(s: QueueSnapshot, now: float) -> str:
    r = s.rate_limits
    pause = r.launches_paused_until - now
    paused = f"launches paused {span(pause)} more" if pause > 0 else "launches not paused"
    return (f"{paused}; waits logged in the last {r.window_sec:.0f} s: {r.waited_requests} requests, "
            f"{r.waited_sec:.0f} s")


def figure_rows(s: QueueSnapshot, now: float) -> list[tuple[str, str]]:
    """(label, text) for every figure, in the order views show them."""
    return [("attempts", progress_text(s)), ("running", phases_text(s)),
            ("set aside", f"{s.set_aside} (each runs again)"), ("score so far", score_text(s.score)),
            ("tokens", tokens_text(s)), ("cost", cost_text(s)), ("ETA", eta_text(s)),
            ("admission", admission_text(s)), ("launches", launches_text(s)), ("rate limits", rate_limit_text(s, now))]


def finish_text(finish: FinishFigure) -> str:
    score = "" if finish.score is None else f", score {finish.score:g}"
    took = "" if finish.duration_sec is None else f" after {span(finish.duration_sec)}"
    return f"{finish.key} attempt {finish.attempt}: {finish.outcome}{score}{took}"


def headline(s: QueueSnapshot) -> str:
    return f"{s.run_id}: {STATE_WORDS.get(s.state, s.state)} (pid {s.pid} on {s.host}, updated {clock(s.updated_at)})"


def status_text(s: QueueSnapshot, now: float) -> str:
    """`ctl status`: the headline, every figure, the last finishes."""
    width = max(len(label) for label, _ in figure_rows(s, now))
    lines = [headline(s)] + [f"  {label:<{width}}  {text}" for label, text in figure_rows(s, now)]
    if s.recent:
        lines += ["  last finishes:"] + [f"    {clock(f.at)}  {finish_text(f)}" for f in s.recent[::-1]]
    return "\n".join(lines)
