"""QUEUE_STATUS.md: what the queue is doing now, rewritten every poll so slow can be told from stuck."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson

from hcu.osworld.queue.snapshot import QueueSnapshot, ScoreFigures
from hcu.osworld.records.identity import repeat_key
from hcu.osworld.records.layout import LEASE_FILE


@dataclass
class ActiveAttempt:
    task_id: str
    attempt: int
    pid: int
    started_at: float
    adopted: bool
    result_dir: Path
    node: str | None = None
    """Where it runs (the host, or the Ray node once placed)."""
    repeat: int = 1

    @property
    def key(self) -> str:
        """The task and repeat, as its folder under tasks/ names them."""
        return repeat_key(self.task_id, self.repeat)


def read_phase(result_dir: Path) -> tuple[str, float | None]:
    """The runner's current phase from progress.json, if it writes one."""
    try:
        progress = orjson.loads((result_dir / "progress.json").read_bytes())
        return str(progress["phase"]), float(progress["since"])
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        pass
    return ("running" if (result_dir / LEASE_FILE).exists() else "launching"), None


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s"


def render(view: QueueSnapshot, now: float | None = None) -> str:
    """QUEUE_STATUS.md from the queue's figures."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    states = Counter(view.final)
    states.update(pending=view.pending, active=view.running)
    lines = [f"# Queue status: {view.run_id}", "", f"Updated {stamp}. {view.note}".rstrip(), "",
             "| state | task repeats |", "|---|---|"]
    lines += [f"| {state} | {count} |" for state, count in sorted(states.items())]
    pause = view.rate_limits.launches_paused_until - now
    lines += ["", f"Launches paused for rate limits: {_age(pause)} more." if pause > 0 else
              "Launches not paused.", *([f"Launches {control_word(view)}."] if control_word(view) else []),
              f"Admission: {view.limit} at once ({view.limit_reason}).", score_line(view.score),
              *([view.spend_line] if view.spend_line else []),
              *(view.forecast.lines if view.forecast else []), "",
              f"## Active ({len(view.active)} of {view.limit})", "",
              "| task | attempt | pid | phase | in phase | age | adopted | node |", "|---|---|---|---|---|---|---|---|"]
    for active in sorted(view.active, key=lambda a: a.started_at):
        in_phase = "" if active.phase_since is None else _age(now - active.phase_since)
        lines.append(f"| {active.key} | {active.attempt} | {active.pid} | {active.phase} | {in_phase} | "
                     f"{_age(now - active.started_at)} | {'yes' if active.adopted else ''} | "
                     f"{active.node or 'placing'} |")
    lines += ["", "## Recent finishes", "", "| task | attempt | outcome | duration |", "|---|---|---|---|"]
    for finish in view.recent[::-1]:
        took = "" if finish.duration_sec is None else _age(finish.duration_sec)
        lines.append(f"| {finish.key} | {finish.attempt} | {finish.outcome} | {took} |")
    lines += ["", f"## Retries ({len(view.retries)})", ""] + [f"- {entry}" for entry in view.retries]
    return "\n".join(lines) + "\n"


def control_word(view: QueueSnapshot) -> str:
    """What the operator asked of launches (`ctl`), in words; empty when nothing."""
    if view.draining:
        return "draining (ctl drain): the queue exits once the running attempts have finished"
    return "paused (ctl pause): no attempt starts until `ctl resume`" if view.paused else ""


def score_line(score: ScoreFigures) -> str:
    if score.mean is None:
        return f"Score so far: none scored yet (0 of {score.planned} repeats; {score.withheld} withheld)."
    return (f"Score so far: {score.mean:.3f} over {score.scored} of {score.planned} repeats scored "
            f"({100 * score.coverage:.1f}% coverage; {score.withheld} withheld).")
