"""A stop signal or phase deadline that lands while Docker creates a guest's container or volume is raised once
the creation has returned, so the removal that follows finds what the daemon made (a SIGTERM in the boot phase
once left a container the daemon created just after the removal had looked for it)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from hcu.osworld.errors import Interrupted
from hcu.osworld.records.interrupts import STOP_SIGNALS, StopSignals, deadline, held


@pytest.fixture
def stop_signals() -> Iterator[StopSignals]:
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        yield StopSignals().install()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_a_stop_signal_during_a_creation_is_raised_once_it_returned(stop_signals: StopSignals) -> None:
    made: list[str] = []
    with pytest.raises(Interrupted, match="runner received SIGTERM"), stop_signals.armed():
        with held():
            os.kill(os.getpid(), signal.SIGTERM)  # lands while the creation runs
            while stop_signals.received is None:  # until the handler has run, in this thread
                pass
            made.append("container")
        made.append("after the creation")
    assert made == ["container"]


def test_a_phase_deadline_during_a_creation_is_raised_once_it_returned() -> None:
    fired: list[bool] = []

    def overrun() -> TimeoutError:
        fired.append(True)
        return TimeoutError("boot: deadline")

    made: list[str] = []
    with pytest.raises(TimeoutError, match="boot: deadline"), deadline(0.001, overrun):
        with held():
            while not fired:  # the deadline passes while the creation runs
                pass
            made.append("container")
        made.append("after the creation")
    assert made == ["container"]


def test_outside_a_held_block_a_stop_signal_is_raised_at_once(stop_signals: StopSignals) -> None:
    with pytest.raises(Interrupted), stop_signals.armed():
        os.kill(os.getpid(), signal.SIGTERM)
        while stop_signals.received is None:
            pass
        pytest.fail("the signal was held outside a held block")
