"""The one error table (issue 14): every class decides retry, score and withhold there; the run's pieces read
it. Pure logic: the table, the scoring rule, the exit status, the stop signals, the phase deadlines."""

from __future__ import annotations

import os
import signal
import time
from typing import get_args

import pytest

from hcu.osworld.attempt.interrupts import StopSignals
from hcu.osworld.errors import (
    CLEAN,
    POLICIES,
    FailureClass,
    Interrupted,
    counted_score,
    policy_for,
)


def test_every_class_has_one_policy() -> None:
    assert set(get_args(FailureClass)) == set(POLICIES)
    assert policy_for(None) is CLEAN and CLEAN.scored and not CLEAN.retry
    assert policy_for("a-class-from-another-version") == POLICIES["runner"], "unknown: neither retried nor scored"
    infrastructure = {name for name, p in POLICIES.items() if p.retry}
    assert infrastructure == {"guest", "guest_memory", "setup", "gateway", "probe", "upstream_rate_limit",
                              "upstream_error", "interrupted", "node_lost"}
    assert [name for name, p in POLICIES.items() if p.lowers_active_tasks] == ["guest_memory"]
    assert not any(p.scored for p in POLICIES.values()), "a failure never yields the evaluator's score"
    assert [name for name, p in POLICIES.items() if p.stop_queue] == ["configuration"]


def test_an_interruption_is_no_exception_a_broad_handler_can_relabel() -> None:
    """Item 1: `except Exception` on the way (readiness, setup, evaluation) lets it through."""
    assert not issubclass(Interrupted, Exception)
    with pytest.raises(Interrupted):
        try:
            raise Interrupted("runner received SIGTERM")
        except Exception:  # what a phase's broad handler does
            pytest.fail("the interruption was caught as a phase failure")


@pytest.mark.parametrize("failure, termination, evaluator, counted", [
    (None, "completed", 1.0, 1.0),
    (None, "max_model_calls", 1.0, 0.0),
    (None, "timeout", 1.0, 0.0),
    ("evaluator", "completed", None, None),
    ("evaluator", "max_model_calls", None, 0.0),  # item 14: the budget ended it; the evaluator's failure no matter
    ("evaluator", "timeout", None, 0.0),
    ("upstream_rate_limit", "completed", None, None),
    ("interrupted", "max_model_calls", None, None),  # retried: the next attempt is the one scored
    ("configuration", None, None, None),
    ("runner", "timeout", None, None),
])
def test_the_score_that_counts(failure: str | None, termination: str | None, evaluator: float | None,
                               counted: float | None) -> None:
    assert counted_score(failure, termination, evaluator) == counted


def test_exit_status() -> None:
    """Item 3: run_task exits 0 only for a completed attempt; 2 when the input itself is wrong."""
    assert policy_for(None).exit_status == 0
    assert policy_for("configuration").exit_status == 2
    assert {p.exit_status for name, p in POLICIES.items() if name != "configuration"} == {1}


@pytest.fixture
def stops():
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield StopSignals().install()
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def test_a_stop_signal_interrupts_the_phases_but_waits_for_the_record(stops: StopSignals) -> None:
    """Item 1: while phases run, SIGTERM raises Interrupted; while the result is recorded it is held (so
    result.json is always written), and it still interrupts an attempt that has not started its phases."""
    with pytest.raises(Interrupted, match="SIGTERM"), stops.armed():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    os.kill(os.getpid(), signal.SIGTERM)  # while recording: held
    assert stops.received == "SIGTERM"
    with pytest.raises(Interrupted), stops.armed():
        pytest.fail("a signal that came before the phases must stop them before they start")
