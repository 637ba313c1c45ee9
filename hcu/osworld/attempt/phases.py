"""Named, timed pipeline phases: each records a PhaseTiming whether it succeeds or raises."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from hcu.osworld.attempt.interrupts import deadline
from hcu.osworld.attempt.result import PhaseTiming
from hcu.osworld.errors import PhaseError

log = logging.getLogger("hcu.run_task")


class PhaseLog:
    """The phases of one attempt, in order, with a callback so progress is visible while it runs."""

    def __init__(self, attempt_id: str, on_change: Callable[[str], None] | None = None) -> None:
        self.attempt_id = attempt_id
        self.phases: list[PhaseTiming] = []
        self.current: str | None = None
        self._on_change = on_change

    @contextmanager
    def phase(self, name: str, *, timeout_sec: float = 0.0,
              overrun: type[PhaseError] | None = None) -> Iterator[None]:
        """Run and time one phase; with `timeout_sec` (0 = none) and its timeout type `overrun`, the phase
        ends with that error at its deadline, wherever it is blocked."""
        started = time.time()
        self.current = name
        try:  # from the start: a signal that lands while progress is written still ends this phase
            log.info("[%s] phase %s: start", self.attempt_id, name)
            if self._on_change:
                self._on_change(name)
            if overrun is None:
                yield
            else:
                message = f"phase {name} overran its timeout of {timeout_sec:g} s (timeout_seconds)"
                with deadline(timeout_sec, lambda: overrun(message)):
                    yield
        except BaseException as exc:
            self._record(name, started, "failed", f"{type(exc).__name__}: {exc}")
            raise
        self._record(name, started, "ok", None)

    def skipped(self, name: str, reason: str) -> None:
        self.phases.append(PhaseTiming(name=name, started_at=time.time(), duration_sec=0.0, status="skipped",
                                       error=reason))

    def _record(self, name: str, started: float, status: str, error: str | None) -> None:
        duration = time.time() - started
        self.phases.append(PhaseTiming(name=name, started_at=started, duration_sec=round(duration, 3),
                                       status=status, error=error))
        log.info("[%s] phase %s: %s in %.1fs%s", self.attempt_id, name, status, duration,
                 f" ({error})" if error else "")
