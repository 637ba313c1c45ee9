"""The attempt runner's phases alongside others: they run at once, in the order their needs give, their
failures and overruns are their own, and each is recorded exactly once whatever ended the attempt."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass, field

from hcu.osworld.attempt import runner as runner_module
from hcu.osworld.attempt.failures import Failure
from hcu.osworld.attempt.runner import Phase, PhaseLog, run_phases
from hcu.osworld.errors import GuestError, ProbeTimeout
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.records.interrupts import StopSignals

WAIT_SEC = 30.0  # a bound on each wait below, never reached when the runner does what it should


@dataclass
class Attempt:
    failure: Failure | None = None
    order: list[str] = field(default_factory=list)
    setup_running: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    recorded: list[Failure | None] = field(default_factory=list)
    upload_failed: bool = False


def step(name: str):
    def run(state: Attempt) -> None:
        state.order.append(name)
    return run


def upload_during_setup(state: Attempt) -> None:
    assert state.setup_running.wait(WAIT_SEC), "upload did not run while setup ran"
    state.order.append("upload")


def setup_until_upload(state: Attempt) -> None:
    state.setup_running.set()
    assert state.release.wait(WAIT_SEC), "setup was not released"
    state.order.append("setup")


def run(phases: list[Phase[Attempt]], state: Attempt) -> tuple[Failure | None, PhaseLog]:
    log = PhaseLog("attempt-1")
    closing = [Phase("cleanup", step("cleanup"))]
    failure = run_phases(state, phases, closing, log_=log, stops=StopSignals(),
                         record=lambda s, f: s.recorded.append(f))
    return failure, log


def statuses(log: PhaseLog) -> dict[str, str]:
    names = [p.name for p in log.phases]
    assert len(names) == len(set(names)), f"a phase recorded twice: {names}"
    return {p.name: p.status for p in log.phases}


def test_alongside_phases_run_beside_setup_in_the_order_their_needs_give() -> None:
    state = Attempt()

    def probe(s: Attempt) -> None:
        s.order.append("probe")
        s.release.set()

    failure, log = run([
        Phase("upload", upload_during_setup, failure="guest", alongside=True),
        Phase("probe", probe, failure="probe", alongside=True, needs=("upload",)),
        Phase("setup", setup_until_upload, failure="setup"),
        Phase("agent", step("agent"), needs=("probe", "upload")),
    ], state)
    assert failure is None and state.recorded == [None]
    assert state.order == ["upload", "probe", "setup", "agent", "cleanup"]
    assert statuses(log) == dict.fromkeys(["upload", "probe", "setup", "agent", "cleanup"], "ok")
    assert [p.name for p in log.phases] == ["upload", "probe", "setup", "agent", "cleanup"], "as declared"


def test_a_failed_alongside_phase_is_its_own_failure_and_what_needs_it_does_not_run() -> None:
    state = Attempt()

    def upload(s: Attempt) -> None:
        raise GuestAPIError("/setup/upload", None, "the guest went away")

    failure, log = run([
        Phase("upload", upload, failure="guest", alongside=True),
        Phase("probe", step("probe"), failure="probe", alongside=True, needs=("upload",)),
        Phase("setup", step("setup"), failure="setup"),
        Phase("agent", step("agent"), needs=("probe", "upload")),
    ], state)
    assert failure is not None and failure.classification == "guest", failure
    assert "the guest went away" in failure.message
    assert state.order == ["setup", "cleanup"]
    assert statuses(log) == {"upload": "failed", "probe": "skipped", "setup": "ok", "cleanup": "ok"}


def test_an_alongside_overrun_ends_the_attempt_as_its_timeout_and_its_late_end_is_not_recorded() -> None:
    state = Attempt()

    def hanging_probe(s: Attempt) -> None:
        s.release.wait(WAIT_SEC)  # blocked until the attempt has ended
        s.order.append("probe")

    failure, log = run([
        Phase("probe", hanging_probe, failure="probe", overrun=ProbeTimeout, deadline_sec=lambda s: 0.2,
              alongside=True),
        Phase("agent", step("agent"), needs=("probe",)),
    ], state)
    assert failure is not None and failure.classification == "probe"
    assert failure.message.startswith("phase probe overran its timeout of 0.2 s"), failure.message
    assert state.order == ["cleanup"], "the agent ran without its probe"
    state.release.set()
    assert statuses(log) == {"probe": "failed", "cleanup": "ok"}
    assert "ProbeTimeout" in (log.phases[0].error or "")


def test_an_alongside_phase_left_running_when_the_attempt_ends_is_recorded_once() -> None:
    state = Attempt()

    def setup(s: Attempt) -> None:
        assert s.setup_running.wait(WAIT_SEC)
        raise GuestError("setup lost the guest")

    def upload(s: Attempt) -> None:
        s.setup_running.set()
        s.release.wait(WAIT_SEC)

    failure, log = run([
        Phase("upload", upload, failure="guest", alongside=True),
        Phase("setup", setup, failure="setup"),
        Phase("agent", step("agent"), needs=("upload",)),
    ], state)
    state.release.set()
    assert failure is not None and failure.classification == "guest" and "setup lost" in failure.message
    assert statuses(log) == {"upload": "failed", "setup": "failed", "cleanup": "ok"}
    upload = next(p for p in log.phases if p.name == "upload")
    assert upload.error == "GuestError: setup lost the guest (while it ran alongside)", upload.error


def waiting_in(thread: int, function: str, filename: str) -> bool:
    """Whether `thread` is inside `function` of `filename` now (its stack, read from here)."""
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_code.co_filename == filename:
            return True
        frame = frame.f_back
    return False


def test_an_alongside_phase_waited_for_when_the_attempt_ends_is_recorded_as_ended_by_it() -> None:
    """The attempt ends (here: a stop signal) while a phase waits for an alongside one: the alongside phase is
    recorded as ended by that, even when it then fails on its own because the closing phases took its guest."""
    state = Attempt()

    def probe(s: Attempt) -> None:
        main = threading.main_thread().ident
        assert main is not None
        while not waiting_in(main, "wait", runner_module.__file__):  # until the runner waits for this phase
            assert not s.release.wait(0.01), "the runner never waited for the probe"
        signal.pthread_kill(main, signal.SIGTERM)
        assert s.release.wait(WAIT_SEC)
        raise GuestAPIError("/execute", None, "no answer (ConnectionError)")  # the guest is gone

    def cleanup(s: Attempt) -> None:
        s.release.set()  # the guest goes: the probe fails now
        s.order.append("cleanup")

    log = PhaseLog("attempt-1")
    stops = StopSignals().install()
    try:
        failure = run_phases(state, [
            Phase("probe", probe, failure="probe", alongside=True),
            Phase("agent", step("agent"), failure="agent", needs=("probe",)),
        ], [Phase("cleanup", cleanup)], log_=log, stops=stops, record=lambda s, f: s.recorded.append(f))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert failure is not None and failure.classification == "interrupted" and "agent" not in state.order
    probe_record = next(p for p in log.phases if p.name == "probe")
    assert probe_record.error.startswith("Interrupted: runner received SIGTERM"), probe_record.error


def test_the_deadline_of_an_alongside_phase_covers_its_wait_for_what_it_needs() -> None:
    state = Attempt()

    def hanging_upload(s: Attempt) -> None:
        s.release.wait(WAIT_SEC)
        if s.upload_failed:
            raise GuestAPIError("/setup/upload", None, "the guest was removed")

    failure, log = run([
        Phase("upload", hanging_upload, failure="guest", alongside=True),
        Phase("probe", step("probe"), failure="probe", overrun=ProbeTimeout, deadline_sec=lambda s: 0.2,
              alongside=True, needs=("upload",)),
        Phase("agent", step("agent"), needs=("probe", "upload")),
    ], state)
    assert failure is not None and failure.classification == "probe", failure
    assert failure.message.startswith("phase probe overran its timeout of 0.2 s"), failure.message
    assert state.order == ["cleanup"]
    state.upload_failed = True
    state.release.set()  # the upload now fails: the probe's thread, still waiting for it, records nothing
    for thread in [t for t in threading.enumerate() if t.name in ("upload", "probe")]:
        thread.join(WAIT_SEC)
    assert statuses(log) == {"upload": "failed", "probe": "failed", "cleanup": "ok"}
