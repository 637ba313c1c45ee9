"""The panel queue behind `python -m hcu.osworld.run_queue`: run a panel, resumably.

The queue runs every task `repeats` times (each repeat scored, with its own identity and its own retries) and
keeps `max_active_tasks` attempts going (on the executor the config names, executors.py),
`launch_stagger_seconds` apart, a round of repeats at a time, longest expected first (order.py), and starts no
attempt once the run's spend has reached `max_cost_usd` (spend.py). Everything it decides is derived from the
run directory (see state.py), so stopping it at any moment (Ctrl-C, SIGTERM, kill -9) loses nothing: the
attempts run on (runner processes in their own sessions, or detached Ray actors), and the next start adopts the
live ones, keeps finished results and sets interrupted or lost attempts aside under retries/ before running
them again.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from hcu.osworld.errors import FailureClass, HcuOSWorldError, policy_for
from hcu.osworld.queue.admission import ReportSource
from hcu.osworld.queue.clock import SYSTEM_CLOCK, QueueClock
from hcu.osworld.queue.control import QueueControl
from hcu.osworld.queue.events import EventLog, QueueSink
from hcu.osworld.queue.executor import Executor, Lost, QueueRefused
from hcu.osworld.queue.executors import make_executor
from hcu.osworld.queue.forecasting import finished_profile, live_forecast
from hcu.osworld.queue.gate import LaunchGate
from hcu.osworld.queue.launch_limit import LaunchLimit
from hcu.osworld.queue.manifest import record_nodes, record_start
from hcu.osworld.queue.order import LaunchQueue, expected_durations
from hcu.osworld.queue.resume import config_difference, refuse_changed_config, run_lock
from hcu.osworld.queue.snapshot import (
    RECENT_FINISHES,
    ActiveFigure,
    FinishFigure,
    ForecastFigures,
    QueueSnapshot,
    QueueState,
    ScoreTally,
    snapshot_path,
)
from hcu.osworld.queue.spend import SpendMeter, ceiling_message
from hcu.osworld.queue.state import RetryNote, TaskView, read_retry_notes, scan_task
from hcu.osworld.queue.status import ActiveAttempt, read_phase, render
from hcu.osworld.records.identity import AttemptId, split_repeat_key
from hcu.osworld.run_config import RunConfig
from hcu.record_io import write_atomic, write_json, write_record

DEFAULT_POLL_SEC = 5.0


STATUS_INTERVAL_SEC = 1.0

__all__ = ["DEFAULT_POLL_SEC", "QueueDrained", "QueueRefused", "QueueStopped", "config_difference", "run_queue",
           "run_lock"]


class QueueStopped(HcuOSWorldError):
    """An attempt ended on a failure every other attempt would repeat (errors.py `stop_queue`), or the run's
    spend reached max_cost_usd: the queue launched nothing more, let the running attempts finish, and says why
    in one line."""


class QueueDrained(HcuOSWorldError):
    """`ctl drain`: the running attempts finished and the queue exited with repeats left to run (one line)."""


class PanelQueue:
    """The launch loop over one run directory (the caller holds the run lock)."""

    def __init__(self, config: RunConfig, executor: Executor, poll_interval_sec: float,
                 gate: LaunchGate | None = None, clock: QueueClock = SYSTEM_CLOCK,
                 sinks: Sequence[QueueSink] = (), reports: ReportSource | None = None) -> None:
        self.sinks: list[QueueSink] = [EventLog(config.run_dir), *sinks]
        self.control = QueueControl(config.run_dir, config)
        config = self.control.config  # with the values `ctl set` gave that still hold
        self.config, self.executor, self.poll_interval_sec = config, executor, poll_interval_sec
        self.clock = clock
        self.gate, self.held = gate, ""
        self.stopped = ""
        """Why launches stopped for good in this run of the queue (one line); empty while they go on."""
        self.spend, self.ceiling_hit = SpendMeter(config), False
        self.run_dir = config.run_dir
        self.specs = {task.id: task for task in config.tasks}
        self.units = [(task.id, repeat) for task in config.tasks for repeat in range(1, config.repeats_of(task) + 1)]
        self.pending = LaunchQueue(self.units, expected_durations(config))
        self.active: dict[str, ActiveAttempt] = {}
        self.final: dict[str, str] = {}
        self.finishes: list[FinishFigure] = []
        self.tally = ScoreTally(len(self.units), clustered=any(config.repeats_of(task) > 1 for task in config.tasks))
        self.started_at = clock.time()
        notes = read_retry_notes(self.run_dir)
        self.retries = [f"{name}: {note.failure_classification if note else 'no retry.json'}"
                        for name, note in notes.items()]
        self.last_launch = self.last_status = 0.0
        lowered = sum(1 for n in notes.values() if n and policy_for(n.failure_classification).lowers_active_tasks)
        self.reports = reports or (lambda: executor.gateway_reports())
        self.limit = LaunchLimit(config, self.reports, lowered, self._event)
        self.pause_until = max((n.moved_at + n.pause_launches_sec for n in notes.values()
                                if n and not self.limit.auto), default=0.0)
        self.recorded_nodes: dict[str, str] = {}
        self.forecast = live_forecast(config)

    def run(self) -> dict[str, str]:
        try:
            return self._run()
        finally:
            for sink in self.sinks:
                sink.close()

    def _run(self) -> dict[str, str]:
        self._event("start", pid=os.getpid(), executor=self.executor.name)
        if self.control.paused or self.control.kept or self.control.dropped:
            self._event("control_restored", paused=self.control.paused, settings=self.control.kept,
                        dropped=self.control.dropped)
        try:
            self._adopt()
            self.limit.begin(self._safe_concurrency, self.clock.time())
            while self._working():
                commanded = self.control.poll(self._event, self.clock.time(), len(self.active))
                if self.control.config is not self.config:
                    self._reconfigure()
                self._reap()
                self.limit.tick(self.clock.time(), self.active.values(), self.executor.capacity(),
                                self.control.set_keys())
                self.forecast.observe(self.clock.time(), self.reports)
                self._launch_due()
                self._record_nodes()
                self._write_status(self.stopped or self.held, force=commanded)  # ctl status shows what it did
                if self._working():
                    self.clock.sleep(self.poll_interval_sec)
        except BaseException:
            self._write_status(f"Queue stopped; {len(self.active)} attempts keep running and are adopted "
                               "by the next start.", force=True, state="interrupted")
            self._event("stop", active=sorted(self.active))
            self.executor.close(run_done=False)
            raise
        removed = [str(a) for a in self.executor.sweep(set())]  # nothing runs now: all final, or launches stopped
        if self.stopped:
            if self.ceiling_hit:  # what the attempts that were running spent too
                self.stopped = ceiling_message(float(self.config.max_cost_usd or 0), self.spend.refresh())
            self._event("stopped", reason=self.stopped, pending=list(self.pending), leftovers_removed=removed)
            self.executor.close(run_done=True)
            fix = "Raise max_cost_usd" if self.ceiling_hit else "Fix it"
            self._write_status(f"{self.stopped}. {fix} and start the queue again: it runs what is left.",
                               force=True, state="stopped")
            raise QueueStopped(self.stopped)
        if self.pending:  # drained
            self._event("drained", pending=list(self.pending), leftovers_removed=removed)
            self.executor.close(run_done=True)
            said = f"drained (ctl drain): {len(self.pending)} repeats not started; start the queue again to run them"
            self._write_status(f"D{said[1:]}.", force=True, state="drained")
            raise QueueDrained(said)
        self._event("done", states=dict(Counter(self.final.values())), leftovers_removed=removed)
        self.executor.close(run_done=True)
        self._write_status("All tasks final.", force=True, state="done")
        return dict(self.final)

    def _working(self) -> bool:
        """Attempts run, or launches are to come (neither stopped for good nor drained)."""
        return bool(self.active or (self.pending and not self.stopped and not self.control.draining))

    def _safe_concurrency(self, ceiling: int) -> int | None:
        return self.forecast.forecast(len(self.pending) + len(self.active), ceiling).safe_concurrency

    def _reconfigure(self) -> None:
        """`ctl set` changed a setting: it holds from this poll on."""
        self.config = self.control.config
        self.limit.reconfigure(self.config, self._safe_concurrency, self.clock.time())
        self.spend.limit = self.config.max_cost_usd
        if self.ceiling_hit and not self.spend.reached():  # a raised ceiling lets launches go on
            self.stopped, self.ceiling_hit = "", False

    def _adopt(self) -> None:
        """Take over what the last queue left: live attempts, finished results, dead attempts, leftovers."""
        for task_id, repeat in self.units:  # a configuration failure found now is one the operator has since fixed
            self._take(scan_task(self.run_dir, task_id, repeat), stop_on_config=False)
        live = {self._attempt_id(active.key, active.attempt) for active in self.active.values()}
        for orphan in self.executor.sweep(live):
            self._event("orphan_containers_removed", task_id=orphan.task_id, repeat=orphan.repeat,
                        attempt=orphan.attempt)

    def _take(self, view: TaskView, *, stop_on_config: bool = True) -> None:
        """Put a scanned repeat where it belongs (an attempt that ended teaches the forecast first)."""
        if view.result is not None and (profile := finished_profile(
                self.config, view, self.config.domain_of(self.specs[view.task_id]))) is not None:
            self.forecast.add(profile)
        if view.state in ("finished", "exhausted"):
            self.final[view.key] = view.state
            self.tally.add(view.task_id, view.repeat, view.result)
        elif view.state == "pending":
            self.pending.push(view.key)
        elif view.state in ("active", "placed"):
            taken = self.executor.adopt(view)
            if isinstance(taken, Lost):
                self._set_aside(view, taken.classification, taken.reason)
                return
            self.last_launch = max(self.last_launch, taken.started_at)  # the stagger holds across restarts
            self.active[view.key] = taken
            self._event("adopt", task_id=view.task_id, repeat=view.repeat, attempt=view.attempt, pid=taken.pid,
                        node=taken.node)
        elif view.state == "foreign":
            assert view.lease is not None
            raise QueueRefused(f"{self._result_dir(view.key)}: attempt {view.attempt} is leased by host "
                               f"{view.lease.host}; run the queue there (this host cannot see its process)")
        elif view.state == "interrupted":
            self._set_aside(view, "interrupted", "the runner is gone and left no result.json")
        elif view.state == "config_failed":  # set aside, so the next start runs it once the cause is fixed
            assert view.result is not None and view.result.failure_classification is not None
            reason = view.result.failure_message or view.result.failure_classification
            if stop_on_config:
                self._stop(view.key, reason)
            self._set_aside(view, view.result.failure_classification, reason)
        else:
            assert view.result is not None and view.result.failure_classification is not None
            self._set_aside(view, view.result.failure_classification, view.result.failure_message or "")

    def _set_aside(self, view: TaskView, classification: FailureClass, reason: str) -> None:
        """Move an infrastructure-failed or interrupted attempt to retries/<key>-<n>/ and queue the repeat."""
        pause = policy_for(classification).pause_launches_sec
        self.limit.lowered += policy_for(classification).lowers_active_tasks
        task_dir, name = self._result_dir(view.key), f"{view.key}-{view.attempt}"
        attempt_id = self._attempt_id(view.key, view.attempt)
        note = RetryNote(task_id=view.task_id, repeat=view.repeat, attempt=view.attempt,
                         failure_classification=classification, reason=reason[:500], moved_at=self.clock.time(),
                         pause_launches_sec=pause, cost_usd=self.spend.scope_cost(attempt_id.gateway_scope))
        write_record(task_dir / "retry.json", note)  # first, so a kill before the move just repeats this
        (self.run_dir / "retries").mkdir(exist_ok=True)
        os.rename(task_dir, self.run_dir / "retries" / name)
        log = self.run_dir / "logs" / f"{view.key}.log"
        if log.exists():
            os.rename(log, self.run_dir / "retries" / name / "runner.log")
        node = view.placement.node if view.placement else None
        self.executor.remove_leftovers(attempt_id, node)
        if not self.limit.auto:
            self.pause_until = max(self.pause_until, note.moved_at + pause)
        elif classification == "upstream_rate_limit":
            self.limit.rate_limited(view.lease.started_at if view.lease else
                                    view.placement.launched_at if view.placement else None)
        self.retries.append(f"{name}: {classification}")
        self._event("set_aside", task_id=view.task_id, repeat=view.repeat, attempt=view.attempt,
                    classification=classification, node=node)
        self._take(scan_task(self.run_dir, view.task_id, view.repeat))

    def _reap(self) -> None:
        for key in self.executor.stopped(list(self.active.values())):
            active = self.active.pop(key)
            lost = self.executor.settle(active)
            view = scan_task(self.run_dir, active.task_id, active.repeat)
            if lost is not None and view.result is None:
                outcome = f"set aside ({lost.classification})"
            else:
                outcome = {"infra_failed": "set aside", "interrupted": "set aside (interrupted)",
                           "config_failed": "set aside; launches stopped",
                           "exhausted": "out of attempts"}.get(view.state, view.state)
            now = self.clock.time()
            score = self.tally.add(view.task_id, view.repeat, view.result) if view.state == "finished" else None
            self.finishes = [*self.finishes[1 - RECENT_FINISHES:], FinishFigure(
                key=key, attempt=active.attempt, outcome=outcome, at=now, duration_sec=now - active.started_at,
                score=score)]
            self._event("exit", task_id=active.task_id, repeat=active.repeat, attempt=active.attempt,
                        state=view.state, node=active.node, score=score)
            if view.state in ("finished", "exhausted"):  # a runner killed after its result leaves containers
                self.executor.remove_leftovers(self._attempt_id(key, active.attempt), active.node)
            if lost is not None and view.result is None:
                if policy_for(lost.classification).stop_queue:  # e.g. a Ray node without KVM (kinds.check_host)
                    self._stop(active.key, lost.reason)
                self._set_aside(view, lost.classification, lost.reason)
            else:
                self._take(view)

    def _launch_due(self) -> None:
        config = self.config
        checked, self.held = False, ""
        if self.control.paused or self.control.draining:
            self.held = "launches draining (ctl drain)" if self.control.draining else "launches paused (ctl pause)"
            return
        while (not self.stopped and self.pending and len(self.active) < self._slots()
               and self.clock.time() >= self.pause_until
               and self.clock.time() - self.last_launch >= config.launch_stagger_seconds):
            if self.spend.reached():  # read before every launch: attempts running now are spending too
                self.stopped, self.ceiling_hit = ceiling_message(float(config.max_cost_usd or 0),
                                                                 self.spend.total.usd), True
                self._event("ceiling", limit=config.max_cost_usd, spent=self.spend.total.usd)
                return
            if self.gate and not checked:
                self.held, checked = self.gate() or "", True
                if self.held:
                    self._event("held", reason=self.held)
                    return
            self._launch(self.pending.pop())

    def _stop(self, key: str, reason: str) -> None:
        """Launches stop for good, for the failure of the repeat `key` (the task id for repeat 1)."""
        if not self.stopped:
            self.stopped = f"launches stopped: task {key}: {reason}"[:500].splitlines()[0]

    def _slots(self) -> int:
        capacity = self.executor.capacity()
        return self.limit.value if capacity is None else min(capacity, self.limit.value)

    def _launch(self, key: str) -> None:
        task_id, repeat = split_repeat_key(key)
        view = scan_task(self.run_dir, task_id, repeat)
        result_dir = self._result_dir(key)
        result_dir.mkdir(parents=True, exist_ok=True)
        active = self.executor.launch(self.specs[task_id], self._attempt_id(key, view.attempt), result_dir)
        self.last_launch = active.started_at
        self.active[key] = active
        self._event("launch", task_id=task_id, repeat=repeat, attempt=view.attempt, pid=active.pid,
                    node=active.node)

    def _record_nodes(self) -> None:
        """manifest.json names the node of every attempt, once it is known."""
        new = {}
        for key, active in self.active.items():
            attempt_id = str(self._attempt_id(key, active.attempt))
            if active.node is not None and self.recorded_nodes.get(attempt_id) != active.node:
                new[attempt_id] = active.node
        if new:
            record_nodes(self.run_dir, new, self.executor.nodes())
            self.recorded_nodes.update(new)

    def _attempt_id(self, key: str, attempt: int) -> AttemptId:
        task_id, repeat = split_repeat_key(key)
        return AttemptId(run_id=str(self.config.run_id), task_id=task_id, attempt=attempt, repeat=repeat)

    def _result_dir(self, key: str) -> Path:
        return self.run_dir / "tasks" / key

    def _write_status(self, note: str, force: bool = False, state: QueueState | None = None) -> None:
        """QUEUE_STATUS.md and queue-status.json, offered to the sinks too: rewritten at most once a second (a
        poll can be much faster), and always when the queue stops."""
        if not force and self.clock.time() - self.last_status < STATUS_INTERVAL_SEC:
            return
        self.last_status = now = self.clock.time()
        if self.limit.lowered:
            note = f"{note} max_active_tasks lowered to {self.limit.value}: guests ran out of memory.".strip()
        snapshot = self._snapshot(note, state or ("stopping" if self.stopped else "draining" if self.control.draining
                                                  else "paused" if self.control.paused else "running"), now)
        write_atomic(self.run_dir / "QUEUE_STATUS.md", render(snapshot, now).encode())
        write_atomic(snapshot_path(self.run_dir), snapshot.model_dump_json().encode())
        for sink in self.sinks:
            sink.figures(snapshot)

    def _snapshot(self, note: str, state: QueueState, now: float) -> QueueSnapshot:
        active = [ActiveFigure(key=a.key, attempt=a.attempt, pid=a.pid, phase=phase, phase_since=since,
                               started_at=a.started_at, adopted=a.adopted, node=a.node)
                  for a in self.active.values() for phase, since in [read_phase(a.result_dir)]]
        to_go = len(self.pending) + len(self.active)
        return QueueSnapshot(
            run_id=str(self.config.run_id), pid=os.getpid(), host=socket.gethostname(), started_at=self.started_at,
            updated_at=now, state=state, note=note, planned=len(self.units),
            final=dict(Counter(self.final.values())), pending=len(self.pending), running=len(self.active),
            phases=dict(Counter(a.phase.split(":")[0] for a in active)), active=active,
            set_aside=len(self.retries), retries=self.retries, recent=self.finishes, limit=self.limit.value,
            limit_reason=self.limit.describe(now),
            slots=self.executor.capacity(), settings=self.control.settings(),
            set_by_ctl=self.control.set_keys(), paused=self.control.paused, draining=self.control.draining,
            held=self.stopped or self.held,
            rate_limits=self.spend.rate_limits(now, self.pause_until),
            spend_usd=self.spend.total.usd if self.config.prices else None, spend_line=self.spend.describe(),
            tokens=self.spend.tokens,
            forecast=ForecastFigures.of(self.forecast.forecast(to_go, self.limit.value),
                                        self.forecast.lines(to_go, len(self.active), self.limit.value)),
            score=self.tally.figures())

    def _event(self, event: str, **fields: object) -> None:
        """One event per queue decision (launches, adoptions, exits, retries, limits, commands), offered to every
        sink: logs/queue.jsonl first, then whatever watches the run."""
        if event == "limit":
            self.limit.noted(fields)
        record = {"at": self.clock.time(), "event": event, **fields}
        for sink in self.sinks:
            sink.event(record)


def run_queue(config: RunConfig, *, runner: Sequence[str] | None = None,
              poll_interval_sec: float = DEFAULT_POLL_SEC, gate: LaunchGate | None = None,
              executor: Executor | None = None, clock: QueueClock = SYSTEM_CLOCK,
              sinks: Sequence[QueueSink] = (), reports: ReportSource | None = None) -> dict[str, str]:
    """Run (or resume) the panel until every repeat of every task is final; returns key (the task id for
    repeat 1, `<task>.r<n>` after it) -> "finished" | "exhausted".
    `gate` holds launches (e.g. `queue_gate.gateway_gate(config)`: while the gateway is down); `runner`
    replaces run_task (tests), `executor` the one the config names (benchmarks), `clock` the system's (tests);
    `sinks` watch its events and figures (the terminal view, the plain-line log: hcu/osworld/live), `reports`
    replaces the gateways' reports the admission reads under "auto" (tests).
    QueueDrained when `ctl drain` ended it with repeats left."""
    with run_lock(config.run_dir):
        refuse_changed_config(config)
        executor = executor or make_executor(config, runner)  # a cluster that cannot be joined writes nothing
        write_json(config.run_dir / "config.json", config.model_dump(mode="json"))
        record_start(config)
        return PanelQueue(config, executor, poll_interval_sec, gate, clock, sinks, reports).run()
