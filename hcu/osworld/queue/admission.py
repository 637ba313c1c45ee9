"""`"max_active_tasks": "auto"` in the queue: the admission that follows the quota (quota/admission.py), fed with
the run's running attempts and its gateways' reports, its limit kept in logs/queue.jsonl.

- **Start**: the limit of the last `limit` event in logs/queue.jsonl (a restarted queue resumes it, clamped to the
  ceiling the config gives now); else the forecast's safe concurrency (clamped to 1..ceiling); else
  `ADMISSION.start`. Each start states its limit as a `limit` event.
- **Each poll** (the gateways at most every `ADMISSION.sample_sec`): the running attempts, those in their agent
  phase (progress.json), and the gateways' report: the executor's `gateway_reports()` (the run's gateway, or each
  Ray node's, which its agent reads on that node).
- **An attempt that ended upstream_rate_limit** lowers the limit. The five-minute launch pause that follows such an
  attempt under a fixed max_active_tasks does not apply under auto: the lowering answers it, and a pause would
  keep the count below the limit the rule is judging.

Only launches are held: a lower limit never stops a running attempt.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from hcu.defaults import ADMISSION, AdmissionDefaults
from hcu.osworld.queue.status import ActiveAttempt, read_phase
from hcu.osworld.quota.admission import Controller, LimitChange, WindowStats
from hcu.osworld.quota.gateway_reading import GatewayReport, reading_of
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import RunConfig

LIMIT_EVENT = "limit"
AGENT_PHASE = "agent"
ReportSource = Callable[[], list[GatewayReport] | None]
"""The run's gateways' reports now (None: none could be read)."""


def last_limit(run_dir: Path) -> dict | None:
    """The last `limit` event of the run's logs/queue.jsonl (None: there is none)."""
    path = run_dir / "logs" / "queue.jsonl"
    if not path.exists():
        return None
    for line in reversed(path.read_bytes().splitlines()):
        if b'"limit"' not in line:
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line torn by a crash
        if event.get("event") == LIMIT_EVENT and isinstance(event.get("limit"), int):
            return event
    return None


@dataclass(frozen=True)
class Decision:
    """A limit the queue states as a `limit` event."""

    change: LimitChange
    fields: dict[str, object]
    """The event's other fields."""

    @property
    def event(self) -> dict[str, object]:
        change = self.change
        return {"limit": change.limit, "previous": change.previous, "signal": change.signal,
                "reason": change.reason, **self.fields}


class AutoAdmission:
    """The queue's admission under auto: `begin` once what the last queue left is taken, then `tick` every poll."""

    def __init__(self, config: RunConfig, reports: ReportSource, rule: AdmissionDefaults | None = None) -> None:
        self.config, self.reports, self.rule = config, reports, rule or ADMISSION
        self.controller: Controller | None = None
        self.heard: list[float | None] = []
        """Launch times of rate-limited attempts the rule has not heard of yet."""
        self.last: Decision | None = None
        self.sampled_at, self.read = -math.inf, False

    def begin(self, safe_concurrency: int | None, now: float) -> Decision:
        """The starting limit: resumed, else the forecast's, else the default."""
        ceiling, last = self.config.active_ceiling, last_limit(self.config.run_dir)
        lowered_at = -math.inf
        if last is not None:
            limit, previous, signal = last["limit"], last["limit"], "resumed"
            reason = "resumed from logs/queue.jsonl"
            lowered_at = float(last.get("lowered_at") or -math.inf)
            if limit > ceiling:
                signal, reason = "ceiling", f"resumed from logs/queue.jsonl, lowered to the new ceiling {ceiling}"
        elif safe_concurrency is not None:
            limit, previous, signal = safe_concurrency, None, "forecast"
            reason = f"the forecast's safe concurrency {safe_concurrency}"
        else:
            limit, previous, signal = self.rule.start, None, "default"
            reason = f"no forecast of the quota: ADMISSION.start {self.rule.start}"
        self.controller = Controller(self.rule, ceiling, limit, changed_at=now, lowered_at=lowered_at)
        self.last = Decision(LimitChange(self.controller.limit, previous, signal, reason),
                             self._fields(self.controller, None))
        return self.last

    @property
    def limit(self) -> int:
        return self.config.active_ceiling if self.controller is None else self.controller.limit

    def rate_limited(self, launched_at: float | None) -> None:
        """An attempt ended upstream_rate_limit (launched at `launched_at`, None when unknown)."""
        self.heard.append(launched_at)

    def tick(self, now: float, active: Iterable[ActiveAttempt], slots: int | None) -> Decision | None:
        """Read the gateways (when due) and let the rule decide, with `slots` the executor's capacity now; the
        change, if any."""
        controller = self.controller
        if controller is None:
            return None
        for launched_at in self.heard:
            controller.rate_limited(launched_at)
        self.heard.clear()
        if now - self.sampled_at < self.rule.sample_sec and not controller.rate_limited_pending:
            return None
        self.sampled_at = now
        running = list(active)
        reports = self.reports()
        reading = None if reports is None else reading_of(reports, now, self.rule.window_sec, self.config.quota)
        self.read = reading is not None
        demanding = [self._scope(a) for a in running if read_phase(a.result_dir)[0] == AGENT_PHASE]
        change = controller.observe(now, len(running), demanding, reading, slots)
        if change is None:
            return None
        self.last = Decision(change, self._fields(controller, change.stats))
        return self.last

    def reconfigure(self, config: RunConfig, now: float) -> Decision | None:
        """The run's settings changed while it runs (`ctl set`): the ceiling they give now holds."""
        self.config = config
        change = None if self.controller is None else self.controller.cap(now, config.active_ceiling)
        if change is None or self.controller is None:
            return None
        self.last = Decision(change, self._fields(self.controller, change.stats))
        return self.last

    def _scope(self, active: ActiveAttempt) -> str:
        return AttemptId(run_id=str(self.config.run_id), task_id=active.task_id, attempt=active.attempt,
                         repeat=active.repeat).gateway_scope

    @staticmethod
    def _fields(controller: Controller, stats: WindowStats | None) -> dict[str, object]:
        """The figures the change was decided on, and what a restart needs to go on from it."""
        share = None if stats is None else stats.wait_share
        headroom = None if stats is None else stats.headroom
        lowered = controller.lowered_at
        return {"ceiling": controller.ceiling, "wait_share": None if share is None else round(share, 4),
                "headroom": None if headroom is None else round(headroom, 4),
                "lowered_at": None if lowered == -math.inf else lowered}

    def describe(self, now: float) -> str:
        """Why the limit is what it is, for QUEUE_STATUS.md and the live view: the rule, its last change and the
        signal now."""
        if self.controller is None or self.last is None:
            return f"auto, ceiling {self.config.active_ceiling}; starting"
        change, stats = self.last.change, self.controller.window(now)
        at = time.strftime("%H:%M:%S UTC", time.gmtime(self.controller.changed_at))
        share = "no agent time measured yet" if stats.wait_share is None else \
            f"{stats.wait_share:.1%} of agent time waited on rate limits over the last {stats.span_sec:.0f} s"
        headroom = "" if stats.headroom is None else f"; upstream headroom {stats.headroom:.0%}"
        unread = "" if self.read else "; the gateways could not be read at the last poll"
        return (f"auto, ceiling {self.controller.ceiling}; {change.signal} at {at}: {change.reason}; "
                f"now {share}{headroom}{unread}")

