"""Signals that end an attempt, delivered as exceptions in the runner's main thread.

A stop signal (SIGTERM/SIGINT) raises `Interrupted` once, only while the attempt's phases run (`armed()`):
while the result is being recorded and the guest removed, a signal is noted and the record is finished first,
so result.json is always written. A phase deadline (`deadline()`) raises the phase's own timeout type from
SIGALRM, wherever the phase is blocked (a guest call, the OSWorld process, a readiness poll). Within `held()`
(a Docker call that creates a guest's container or volume) either is raised only once the block ends.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from hcu.osworld.errors import Interrupted

log = logging.getLogger("hcu.run_task")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_held: list[BaseException] | None = None
"""While a `held()` block runs: what a signal raised meanwhile (the first), to raise at its end."""


def _raise(exc: BaseException) -> None:
    if _held is None:
        raise exc
    if not _held:
        _held.append(exc)


@contextmanager
def held() -> Iterator[None]:
    """A stop signal or phase deadline arriving in this block is raised when the block ends. Around a Docker call
    that creates something: raised mid-call, it would leave the daemon creating a container just after the
    removal on the failure path looked for it. (Blocking the signals would not do: in a process with threads
    the kernel hands them to another thread and Python still runs the handler in this one.)"""
    global _held
    _held = []
    try:
        yield
    finally:
        pending, _held = _held, None
        if pending:
            raise pending[0]


class StopSignals:
    """The runner's SIGTERM/SIGINT handler."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._armed = False

    def install(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        self.received = self.received or name
        if self._armed:
            self._armed = False  # one Interrupted per attempt: what follows records it
            _raise(Interrupted(f"runner received {name}"))
            return
        log.warning("%s received while the attempt is being recorded: finishing the record first", name)

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Within this block a stop signal raises `Interrupted` (at once if one came before it)."""
        if self.received:
            raise Interrupted(f"runner received {self.received}")
        self._armed = True
        try:
            yield
        finally:
            self._armed = False


@contextmanager
def deadline(seconds: float, overrun: Callable[[], BaseException]) -> Iterator[None]:
    """Raise `overrun()` in this (main) thread if the block is still running after `seconds`; 0 = none."""
    if seconds <= 0:
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        _raise(overrun())

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
