"""One canary: the attempt without an agent. The attempt runner with this phase list: load, boot, setup, then
(with `probe`) computer-use uploaded and the MCP probe run against the set-up desktop, then (with
`run_evaluator`) the official evaluator on the untouched state; cleanup whatever happened; report.json.

A canary cannot pass a broken setup: a guest answer that is not a success fails its step (as in run_task);
after `launch`, `open` and `chrome_open_tabs` the application must really be there; and a getter that read
nothing of the guest's state fails the canary ("the evaluator could not read the state").
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from hcu import REPO_ROOT
from hcu.computer_use.channels import DEFAULT_CHANNELS
from hcu.defaults import GUEST
from hcu.osworld.agents.base import COMPUTER_USE_PATH, DEFAULT_DESKTOP_ENV, McpServerSpec
from hcu.osworld.attempt import guest_phases as guest
from hcu.osworld.attempt.failures import Failure
from hcu.osworld.attempt.guest_phases import AssetSource, AttemptState
from hcu.osworld.attempt.mcp_probe import ProbeReport
from hcu.osworld.attempt.probe import check_mcp
from hcu.osworld.attempt.runner import Phase, PhaseLog, run_phases
from hcu.osworld.errors import (
    BootTimeout,
    EvaluationTimeout,
    EvaluatorError,
    GuestError,
    ProbeTimeout,
    SetupTimeout,
)
from hcu.osworld.guest.kinds import kind_for
from hcu.osworld.guest.readiness import ReadinessStep
from hcu.osworld.guest_state.start import StartRecord
from hcu.osworld.osworld_bridge.evaluate import EvalResult
from hcu.osworld.osworld_bridge.process import OSWorldProcess
from hcu.osworld.osworld_bridge.setup import SetupStepRecord
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.result import PhaseTiming, RecordedFailureClass
from hcu.osworld.settings import SAFE_NAME, GuestAttemptSettings, TimeoutSettings
from hcu.record_io import Record, write_record

REPORT_NAME = "report.json"


class CanaryOptions(TimeoutSettings, GuestAttemptSettings):
    task_id: str = Field(pattern=SAFE_NAME)
    """The OSWorld task id."""
    result_dir: Path
    """Where report.json (and the guest's work files) go."""
    run_evaluator: bool = False
    """Also score the untouched setup state with the official evaluator (usually 0)."""
    probe: bool = False
    """Also upload computer-use and run the MCP probe (apps, observe, find, screenshot) on the set-up desktop."""
    mcp_binary: Path = REPO_ROOT / "artifacts" / "computer-use"
    """The computer-use server the probe uploads (`make build-local`)."""
    boot_timeout: float = Field(default=GUEST.boot_timeout_sec, gt=0)
    """Seconds the guest may take to become ready."""
    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Label the guest with this run id (default: a fresh canary-<random> id); `cleanup --run-id` finds it."""


class CanaryReport(Record):
    status: Literal["passed", "failed"]
    benchmark_version: str
    task_id: str
    task_domain: str | None = None
    task_sha256: str | None = None
    guest_kind: str
    guest_image: str
    volume_size_gb: int
    desktop_env: str | None = None
    """The OSWorld code that ran setup and evaluation (its `desktop_env` package directory)."""
    osworld_python: str | None = None
    """The interpreter of the OSWorld process."""
    hcu: str | None = None
    """The hcu checkout whose code the OSWorld process ran."""
    stand_ins: bool = False
    """The task's files were generated stand-ins (`--asset-stand-ins`), not the real ones."""
    readiness: list[ReadinessStep] = []
    guest_start: StartRecord | None = None
    """How the guest started: restored from this host's snapshot or booted cold, and why cold when a snapshot was
    asked for."""
    console_log: str | None = None
    """The guest's log tail (its serial console, for a VM), kept when it did not become ready."""
    setup_steps: list[SetupStepRecord] = []
    mcp_probe: ProbeReport | None = None
    evaluator: EvalResult | None = None
    """Present once the evaluator returned a score ("evaluated"), even when the canary failed on a getter."""
    failure_classification: RecordedFailureClass | None = None
    error: str | None = None
    phases: list[PhaseTiming] = []
    """Each phase of the canary, timed, the failed one last."""
    duration_sec: float = 0.0

    @property
    def bad_input(self) -> bool:
        """The canary failed before any guest started: its task, settings or files do not load."""
        return any(p.name == "load" and p.status == "failed" for p in self.phases)


CanaryAttempt = AttemptState[CanaryOptions]
"""A canary's state: its phases read the canary's options."""


def _timeout(state: CanaryAttempt) -> float:
    return state.settings.timeout_seconds


def _upload(state: CanaryAttempt) -> None:
    assert state.guest is not None
    api = state.guest.api
    api.upload(COMPUTER_USE_PATH, Path(state.settings.mcp_binary).read_bytes())
    result = api.execute(["chmod", "755", COMPUTER_USE_PATH], timeout_sec=60)
    if result.returncode not in (0, None):
        raise GuestError(f"could not make {shlex.quote(COMPUTER_USE_PATH)} executable: {result.error[-200:]}")


def _probe(state: CanaryAttempt) -> None:
    assert state.guest is not None
    channels = list(DEFAULT_CHANNELS)
    server = McpServerSpec(command=COMPUTER_USE_PATH, args=["--channels", ",".join(channels)],
                           env=dict(DEFAULT_DESKTOP_ENV))
    state.meta.mcp_probe = check_mcp(state.guest.api, server, channels)


def _evaluate(state: CanaryAttempt) -> None:
    scored = guest.score(state, last_action=None, deadline_sec=state.settings.timeout_seconds)
    if scored.getters_read_nothing:
        empty = "; ".join(f"{g.getter}: {g.reason}" for g in scored.getters_read_nothing)
        raise EvaluatorError(f"the evaluator could not read the state: {empty}")


def _unless(wanted: Callable[[CanaryOptions], bool], why: str) -> Callable[[CanaryAttempt], str | None]:
    """A phase's `skip`: it runs only when the canary's options want it."""
    return lambda state: None if wanted(state.settings) else why


PHASES: list[Phase[CanaryAttempt]] = [
    Phase("load", guest.load, failure="configuration"),
    Phase("boot", guest.boot, failure="guest", overrun=BootTimeout, deadline_sec=_timeout),
    Phase("setup", guest.setup, failure="setup", overrun=SetupTimeout, deadline_sec=_timeout),
    Phase("upload", _upload, failure="guest", skip=_unless(lambda s: s.probe, "no --probe")),
    Phase("probe", _probe, failure="probe", overrun=ProbeTimeout, deadline_sec=_timeout,
          skip=_unless(lambda s: s.probe, "no --probe")),
    Phase("evaluate", _evaluate, failure="evaluator", overrun=EvaluationTimeout, deadline_sec=_timeout,
          skip=_unless(lambda s: s.run_evaluator, "no --run-evaluator")),
]
CLOSING: list[Phase[CanaryAttempt]] = [Phase("cleanup", guest.cleanup)]


def run(opts: CanaryOptions, *, asset_source: AssetSource, stops: StopSignals | None = None,
        osworld: OSWorldProcess | None = None) -> CanaryReport:
    """One canary on resolved `opts`, its task files from `asset_source`; report.json is written whatever happens
    and the guest is always removed. A sweep passes its worker's running OSWorld process (`osworld`), opened on
    this canary's guest instead of starting one, and left running."""
    attempt = AttemptId(run_id=opts.run_id or f"canary-{uuid.uuid4().hex[:12]}", task_id=opts.task_id, attempt=1)
    phases = PhaseLog(str(attempt))
    state = CanaryAttempt(settings=opts, attempt=attempt, result_dir=opts.result_dir, phases=phases,
                          boot_timeout_sec=opts.boot_timeout, asset_source=asset_source, osworld=osworld,
                          reused_osworld=osworld is not None)
    report: list[CanaryReport] = []

    def record(state: CanaryAttempt, failure: Failure | None) -> None:
        report.append(_report(state, failure, phases.phases))
        write_record(opts.result_dir / REPORT_NAME, report[0])

    run_phases(state, PHASES, CLOSING, log_=phases, stops=stops or StopSignals(), record=record)
    return report[0]


def _report(state: CanaryAttempt, failure: Failure | None, phases: list[PhaseTiming]) -> CanaryReport:
    s, meta, task = state.settings, state.meta, state.task
    spec = meta.guest.spec if meta.guest else None
    kind = kind_for(s)
    return CanaryReport(
        status="failed" if failure else "passed", benchmark_version=s.benchmark_version, task_id=s.task_id,
        task_domain=task.domain if task else s.task_domain, task_sha256=meta.task_sha256,
        guest_kind=spec.kind if spec else kind.name, guest_image=spec.image if spec else str(kind.image_in(s)),
        volume_size_gb=(spec.volume_size_gb if spec else None) or s.volume_size or 0,
        desktop_env=meta.osworld.desktop_env, osworld_python=meta.osworld.python, hcu=meta.osworld.hcu,
        stand_ins=bool(state.assets and state.assets.stand_ins),
        readiness=meta.guest.readiness if meta.guest else [],
        guest_start=meta.guest.start if meta.guest else None,
        console_log=meta.guest.console_log if meta.guest else None,
        setup_steps=meta.setup_steps, mcp_probe=meta.mcp_probe, evaluator=state.evaluation,
        failure_classification=failure.classification if failure else None,
        error=failure.message if failure else None, phases=phases,
        duration_sec=round(sum(p.duration_sec for p in phases), 3))
