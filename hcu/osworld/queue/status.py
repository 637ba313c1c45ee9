"""QUEUE_STATUS.md: what the queue is doing now, rewritten every poll so slow can be told from stuck."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from hcu.osworld.records.identity import repeat_key
from hcu.osworld.records.layout import LEASE_FILE

RECENT_FINISHES = 10


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


@dataclass
class Finish:
    key: str
    """The task and repeat (`<task>` or `<task>.r<n>`)."""
    attempt: int
    outcome: str
    """"finished", "set aside (<class>)" or "exhausted"."""
    at: float
    duration_sec: float | None


@dataclass
class StatusView:
    run_id: str
    max_active_tasks: int
    states: Counter[str]
    active: list[ActiveAttempt]
    finishes: list[Finish] = field(default_factory=list)
    retries: list[str] = field(default_factory=list)
    pause_until: float = 0.0
    note: str = ""
    spend: str = ""
    """The run's spend against its max_cost_usd, in words (spend.py)."""
    admission: str = ""
    """Under "max_active_tasks": "auto": the limit, why, and the signal now (admission.py)."""
    forecast: list[str] = field(default_factory=list)
    """The campaign forecast: ETA, tokens, calls and cost to go (quota/live.py)."""


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


def render(view: StatusView, now: float | None = None) -> str:
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    lines = [f"# Queue status: {view.run_id}", "", f"Updated {stamp}. {view.note}".rstrip(), "",
             "| state | task repeats |", "|---|---|"]
    lines += [f"| {state} | {count} |" for state, count in sorted(view.states.items())]
    pause = view.pause_until - now
    lines += ["", f"Launches paused for rate limits: {_age(pause)} more." if pause > 0 else
              "Launches not paused.", *([view.admission] if view.admission else []),
              *([view.spend] if view.spend else []),
              *view.forecast, "",
              f"## Active ({len(view.active)} of {view.max_active_tasks})", "",
              "| task | attempt | pid | phase | in phase | age | adopted | node |", "|---|---|---|---|---|---|---|---|"]
    for active in sorted(view.active, key=lambda a: a.started_at):
        phase, since = read_phase(active.result_dir)
        in_phase = "" if since is None else _age(now - since)
        lines.append(f"| {active.key} | {active.attempt} | {active.pid} | {phase} | {in_phase} | "
                     f"{_age(now - active.started_at)} | {'yes' if active.adopted else ''} | "
                     f"{active.node or 'placing'} |")
    lines += ["", "## Recent finishes", "", "| task | attempt | outcome | duration |", "|---|---|---|---|"]
    for finish in view.finishes[-RECENT_FINISHES:][::-1]:
        took = "" if finish.duration_sec is None else _age(finish.duration_sec)
        lines.append(f"| {finish.key} | {finish.attempt} | {finish.outcome} | {took} |")
    lines += ["", f"## Retries ({len(view.retries)})", ""] + [f"- {entry}" for entry in view.retries]
    return "\n".join(lines) + "\n"
