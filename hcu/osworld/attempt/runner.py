"""The attempt runner: an attempt is an ordered list of phases, run under one attempt id.

Each phase declares its name, its deadline (with the timeout type it ends with) and the failure class of the
errors raised in it; a phase that depends on none of those after it may run `alongside` them, on its own thread
(after the alongside phases it `needs`), until the first phase that `needs` it waits for it: under its own
deadline, counted from its start, and what it raised is its failure. The runner owns everything else: timing each phase
(`PhaseLog`, with the node's admission before it and progress.json as it goes), deadlines and stop signals
(`interrupts`), the one translation of what ended the attempt into the error table's classes
(`failures.translate`), the closing phases that always run (collect, cleanup), and writing the attempt's records
in `finally`. `run_task` and `setup_canary` are this
runner with different phase lists.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from hcu.osworld.attempt.background import in_background
from hcu.osworld.attempt.failures import Failure, translate
from hcu.osworld.errors import FailureClass, PhaseTimeout
from hcu.osworld.records.interrupts import StopSignals, deadline
from hcu.osworld.records.result import PhaseTiming
from hcu.record_io import write_json

log = logging.getLogger("hcu.run_task")

def overrun_message(phase: str, timeout_sec: float) -> str:
    return f"phase {phase} overran its timeout of {timeout_sec:g} s (timeout_seconds)"


class AttemptRecord(Protocol):
    failure: Failure | None
    """What ended the attempt, set before the closing phases run."""


S = TypeVar("S", bound=AttemptRecord)


class PhaseLog:
    """The phases of one attempt, in order, with a callback so progress is visible while it runs."""

    def __init__(self, attempt_id: str, on_change: Callable[[str], None] | None = None,
                 admit: Callable[[str], None] | None = None) -> None:
        self.attempt_id = attempt_id
        self.phases: list[PhaseTiming] = []
        self.current: str | None = None
        self._on_change = on_change
        self._admit = admit  # waits until the node admits the phase (attempt/node_admission.py); not phase time
        self._abandoned: set[str] = set()
        self._lock = threading.RLock()  # alongside phases record from their own threads

    @classmethod
    def writing_progress(cls, attempt_id: str, result_dir: Path,
                         admit: Callable[[str], None] | None = None) -> PhaseLog:
        """A log that keeps `result_dir/progress.json` on the current phase (the queue's status reads it)."""
        return cls(attempt_id, admit=admit, on_change=lambda name: write_json(
            result_dir / "progress.json", {"phase": name, "since": time.time()}))

    @contextmanager
    def phase(self, name: str, *, timeout_sec: float = 0.0,
              overrun: type[PhaseTimeout] | None = None) -> Iterator[None]:
        """Run and time one phase; with `timeout_sec` (0 = none) and its timeout type `overrun`, the phase
        ends with that error at its deadline, wherever it is blocked. The node's admission comes first: the
        wait for it is neither phase time nor under the phase's deadline (a stop signal still ends it)."""
        if self._admit:
            self._admit(name)
        started = time.time()
        try:  # from the start: a signal that lands while progress is written still ends this phase
            with self._lock:  # alongside phases start on their own threads: progress names the phase started last
                self.current = name
                log.info("[%s] phase %s: start", self.attempt_id, name)
                if self._on_change:
                    self._on_change(name)
            if overrun is None:
                yield
            else:
                message = overrun_message(name, timeout_sec)
                with deadline(timeout_sec, lambda: overrun(message)):
                    yield
        except BaseException as exc:
            self._record(name, started, "failed", f"{type(exc).__name__}: {exc}")
            raise
        self._record(name, started, "ok", None)

    def abandoned(self, name: str, started: float, error: str) -> None:
        """A phase left running on its thread (past its deadline, or the attempt ended): recorded failed now,
        unless it recorded its own end already, and never again."""
        with self._lock:
            if name not in self._abandoned and all(p.name != name for p in self.phases):
                self._record(name, started, "failed", error)
            self._abandoned.add(name)

    def in_order(self, names: list[str]) -> None:
        """The phases as `names` lists them (alongside phases end in any order; the record does not)."""
        with self._lock:
            self.phases.sort(key=lambda p: names.index(p.name) if p.name in names else len(names))

    def skipped(self, name: str, reason: str) -> None:
        with self._lock:
            if name in self._abandoned:  # recorded already, as left running past its deadline or the attempt
                return
            self.phases.append(PhaseTiming(name=name, started_at=time.time(), duration_sec=0.0, status="skipped",
                                           error=reason))

    def _record(self, name: str, started: float, status: str, error: str | None) -> None:
        with self._lock:
            if name in self._abandoned:
                return
            self._append(name, started, status, error)

    def _append(self, name: str, started: float, status: str, error: str | None) -> None:
        duration = time.time() - started
        self.phases.append(PhaseTiming(name=name, started_at=started, duration_sec=round(duration, 3),
                                       status=status, error=error))
        log.info("[%s] phase %s: %s in %.1fs%s", self.attempt_id, name, status, duration,
                 f" ({error})" if error else "")


@dataclass(frozen=True)
class Phase(Generic[S]):
    name: str
    run: Callable[[S], None]
    failure: FailureClass = "runner"
    """The class of the lower-level errors that end this phase (failures.translate)."""
    overrun: type[PhaseTimeout] | None = None
    """The timeout type the phase ends with at its deadline."""
    deadline_sec: Callable[[S], float] | None = None
    """The phase's deadline (0 = none); only with `overrun`."""
    skip: Callable[[S], str | None] | None = None
    """Why the phase does not run this time (None: it runs)."""
    alongside: bool = False
    """Runs on its own thread beside the phases after it; what it raises, or its overrun, ends the attempt
    when a phase waits for it."""
    needs: tuple[str, ...] = ()
    """The `alongside` phases this one waits for before it starts."""


def run_phases(state: S, phases: Sequence[Phase[S]], closing: Sequence[Phase[S]], *, log_: PhaseLog,
               stops: StopSignals, record: Callable[[S, Failure | None], None]) -> Failure | None:
    """Run `phases` in order until one fails, then `closing` (each runs whatever happened; its errors are
    logged, never the attempt's failure), then `record(state, failure)`. Stop signals end the attempt as
    `interrupted` in any phase; they are held while the closing phases run and the records are written."""
    failure: Failure | None = None
    ended_by = "the attempt ended"  # what the alongside phases still running are recorded as ended by
    current: Phase[S] | None = None
    beside: dict[str, _Beside[S]] = {}
    try:
        with stops.armed():
            for phase in phases:
                current = phase
                reason = phase.skip(state) if phase.skip else None
                if reason is not None:
                    log_.skipped(phase.name, reason)
                    continue
                if phase.alongside:
                    needs = [beside[name].done for name in phase.needs if name in beside]
                    beside[phase.name] = _Beside(phase, time.time(), in_background(
                        _timed(phase, state, log_, needs), phase.name))
                    continue
                for name in phase.needs:
                    if name in beside:
                        current = beside[name].phase  # what it raised, or its overrun, is its failure
                        beside[name].wait(state, log_)
                        del beside[name]  # only once it ended: one the attempt ends while it waits is abandoned
                current = phase
                timeout = phase.deadline_sec(state) if phase.deadline_sec else 0.0
                with log_.phase(phase.name, timeout_sec=timeout, overrun=phase.overrun):
                    phase.run(state)
            for name in list(beside):
                current = beside[name].phase
                beside[name].wait(state, log_)
                del beside[name]
    except BaseException as exc:  # whatever ended it: recorded; a SystemExit or KeyboardInterrupt goes on too
        failure = translate(exc, current.failure if current else "runner")
        ended_by = f"{type(exc).__name__}: {exc}"
        if failure.classification == "runner":
            log.error("[%s] runner error", log_.attempt_id, exc_info=exc)
        if not isinstance(exc, Exception) and failure.classification == "runner":
            raise
    finally:
        for left in beside.values():  # the attempt ended before anything waited for them
            log_.abandoned(left.phase.name, left.started_at, f"{ended_by} (while it ran alongside)")
        state.failure = failure  # what the closing phases may need to know (e.g. why the evidence ends)
        for phase in closing:
            try:
                with log_.phase(phase.name):
                    phase.run(state)
            except Exception as exc:  # the attempt's outcome is decided; what the closing misses is logged
                log.error("[%s] %s failed: %s", log_.attempt_id, phase.name, exc)
        log_.in_order([phase.name for phase in [*phases, *closing]])
        record(state, failure)
    return failure


@dataclass
class _Beside(Generic[S]):
    """An alongside phase while it runs on its thread."""

    phase: Phase[S]
    started_at: float
    done: Future[None]

    def wait(self, state: S, log_: PhaseLog) -> None:
        """Until it ends, within its deadline from its start: then it ends the attempt as its overrun, recorded
        here (its thread, still blocked, records nothing more)."""
        overrun = self.phase.overrun
        timeout = self.phase.deadline_sec(state) if self.phase.deadline_sec and overrun else 0.0
        if overrun is None or timeout <= 0:
            self.done.result()
            return
        message = overrun_message(self.phase.name, timeout)
        try:
            with deadline(max(timeout - (time.time() - self.started_at), 1e-3), lambda: overrun(message)):
                self.done.result()
        except PhaseTimeout as exc:
            if not self.done.done():
                log_.abandoned(self.phase.name, self.started_at, f"{type(exc).__name__}: {exc}")
            raise


def _timed(phase: Phase[S], state: S, log_: PhaseLog, needs: Sequence[Future[None]]) -> Callable[[], None]:
    """An alongside phase as its thread runs it: after the alongside phases it needs (when one failed, its
    waiter reports that, and this one does not run), timed and recorded like any other."""
    def run() -> None:
        for need in needs:
            if need.exception() is not None:
                log_.skipped(phase.name, "a phase it needs failed")
                return
        with log_.phase(phase.name):
            phase.run(state)
    return run
