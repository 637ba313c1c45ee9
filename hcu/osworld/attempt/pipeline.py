"""One attempt of one OSWorld task, end to end, in a fresh guest (what `python -m hcu.osworld.run_task` runs).

The attempt runner (runner.py) with this phase list: load, boot, isolate, upload and then probe (both alongside
setup), setup, agent, settle, save desktop (the final desktop saved before the evaluator reads it), evaluate, then
collect (with the saved desktop kept or let go) and cleanup whatever happened. Boot, setup, probe, agent and
evaluate each end at `timeout_seconds` with their own timeout type. result.json and meta.json are always written
and the guest is always removed.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from hcu.osworld.attempt import agent_phases as agent
from hcu.osworld.attempt import guest_phases as guest
from hcu.osworld.attempt.agent_phases import AgentAttempt
from hcu.osworld.attempt.failures import Failure
from hcu.osworld.attempt.guest_phases import AssetSource
from hcu.osworld.attempt.node_admission import admission_from_env
from hcu.osworld.attempt.options import RunTaskOptions
from hcu.osworld.attempt.runner import Phase, PhaseLog, run_phases
from hcu.osworld.errors import BootTimeout, EvaluationTimeout, ProbeTimeout, SetupTimeout, counted_score
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.guest.kinds import SavedDesktop
from hcu.osworld.guest_state import kept
from hcu.osworld.guest_state.snapshots import image_sha256
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.layout import LEASE_FILE, META_FILE, RESULT_FILE
from hcu.osworld.records.lease import lease_for_this_process
from hcu.osworld.records.result import TaskResult
from hcu.record_io import write_record


def _timeout(state: AgentAttempt) -> float:
    return state.settings.timeout_seconds


def _load(state: AgentAttempt) -> None:
    state.settings = state.settings.resolved(Path.cwd(), bridge_address)
    guest.load(state)
    agent.render_agent(state)
    state.save_dir = kept.save_dir(state.result_dir, state.settings.keep_final_desktop, state.attempt)


def _save_desktop(state: AgentAttempt) -> None:
    """The final desktop as the evaluator will find it (never fails the attempt: what went wrong is its record)."""
    assert state.guest is not None
    s = state.settings
    state.saved_desktop = kept.save(state.guest, state.save_dir, s.keep_final_desktop,
                                    s.keep_final_desktop_budget_gb)


def _evaluate(state: AgentAttempt) -> None:
    assert state.outcome is not None
    guest.score(state, last_action=state.outcome.last_action, deadline_sec=state.settings.timeout_seconds)


def _collect(state: AgentAttempt) -> None:
    """The saved desktop kept (desktop.json beside it) or let go, by keep_final_desktop and the attempt's score;
    then the attempt's usage and evidence."""
    _keep(state)
    agent.collect(state)


def _keep(state: AgentAttempt) -> None:
    s, outcome, task = state.settings, state.outcome, state.task
    saved = state.saved_desktop
    record = None
    if isinstance(saved, SavedDesktop) and task is not None and outcome is not None:
        record = kept.KeptDesktop(
            attempt_id=str(state.attempt), task_id=state.attempt.task_id, kind=saved.kind, saved=saved,
            base_image=str(s.guest_image) if s.guest_image else None,
            base_sha256=image_sha256(s.guest_image) if s.guest_image else None, task_sha256=task.sha256,
            evaluator_sha256=kept.evaluator_sha256(task), last_action=outcome.last_action,
            termination_reason=outcome.termination_reason, kept_at=time.time())
    failure = state.failure.classification if state.failure else None
    evaluated = state.evaluation.score if state.evaluation else None
    score = counted_score(failure, outcome.termination_reason if outcome else None, evaluated)
    state.meta.final_desktop = kept.finish(state.save_dir, saved, attempt=state.attempt, mode=s.keep_final_desktop,
                                           budget_gb=s.keep_final_desktop_budget_gb, score=score, kept=record)


PHASES: list[Phase[AgentAttempt]] = [
    Phase("load", _load, failure="configuration"),
    Phase("boot", guest.boot, failure="guest", overrun=BootTimeout, deadline_sec=_timeout),
    Phase("isolate", agent.isolate, failure="guest"),
    # Setup needs neither the upload nor the checks of it (and they do not touch the desktop): all at once.
    Phase("upload", agent.upload, failure="guest", alongside=True),
    Phase("probe", agent.probe, failure="probe", overrun=ProbeTimeout, deadline_sec=_timeout, alongside=True,
          needs=("upload",)),
    Phase("setup", guest.setup, failure="setup", overrun=SetupTimeout, deadline_sec=_timeout),
    # The probe first: its deadline, from its start, covers its wait for the upload (a hung upload is a probe
    # overrun); then the upload, done by then, with its own failure if it had one.
    Phase("agent", agent.agent, failure="agent", needs=("probe", "upload")),  # its own limits, extended by waits
    Phase("settle", agent.settle, skip=agent.not_scored),
    Phase("save desktop", _save_desktop, skip=agent.not_scored),
    Phase("evaluate", _evaluate, failure="evaluator", overrun=EvaluationTimeout, deadline_sec=_timeout,
          skip=agent.not_scored),
]
CLOSING: list[Phase[AgentAttempt]] = [Phase("collect", _collect), Phase("cleanup", guest.cleanup)]


def run_task(opts: RunTaskOptions, stops: StopSignals | None = None, *, asset_source: AssetSource) -> TaskResult:
    """Run the attempt; `stops` (installed by the command) turns SIGTERM/SIGINT into `interrupted`; `asset_source`
    gives the source of the task's files for the resolved settings."""
    result_dir = opts.resolved_result_dir()
    result_dir.mkdir(parents=True, exist_ok=True)
    attempt = AttemptId(run_id=opts.run_id, task_id=opts.task_id, attempt=opts.attempt, repeat=opts.repeat)
    phases = PhaseLog.writing_progress(str(attempt), result_dir, admit=admission_from_env())
    state = AgentAttempt(settings=opts, attempt=attempt, result_dir=result_dir, phases=phases,
                         boot_timeout_sec=math.inf,  # the boot phase's own deadline ends the boot
                         asset_source=asset_source)
    result = TaskResult(status="error", attempt_id=str(attempt), run_id=attempt.run_id, task_id=attempt.task_id,
                        attempt=attempt.attempt, repeat=attempt.repeat, benchmark_version=opts.benchmark_version,
                        agent=opts.agent, started_at=time.time())
    write_record(result_dir / LEASE_FILE, lease_for_this_process(attempt, result_dir))

    def record(state: AgentAttempt, failure: Failure | None) -> None:
        _fill(result, state, failure)
        result.phases = phases.phases
        result.finished_at = time.time()
        result.duration_sec = round(result.finished_at - result.started_at, 3)
        write_record(result_dir / META_FILE, state.meta)
        write_record(result_dir / RESULT_FILE, result)

    run_phases(state, PHASES, CLOSING, log_=phases, stops=stops or StopSignals(), record=record)
    return result


def _fill(result: TaskResult, state: AgentAttempt, failure: Failure | None) -> None:
    """result.json from what the phases left: the agent's outcome, the evaluator's score, or the failure that
    ended the attempt (the error table decides whether a score stands: 0 on budget or timeout)."""
    s, outcome = state.settings, state.outcome
    result.model, result.effort, result.usage, result.cost_usd = s.model, s.effort, state.usage, state.cost_usd
    if state.task is not None:
        result.task_domain = state.task.domain
    if state.assets is not None:
        result.stand_ins = state.assets.stand_ins  # generated task files: marked, never part of a scored run
    if outcome is not None:
        result.termination_reason, result.termination_detail = outcome.termination_reason, outcome.termination_detail
        result.protocol_word, result.rate_limit_resumes = outcome.protocol_word, outcome.rate_limit_resumes
        if outcome.failure_classification and failure is None:
            failure = Failure(outcome.failure_classification, outcome.failure_message or "")
    if any(p.name == "settle" and p.status != "skipped" for p in state.phases.phases):
        result.settle_seconds = s.settle_seconds
    if failure is not None:
        result.status = "evaluator_error" if failure.classification == "evaluator" else "error"
        result.failure_classification, result.failure_message = failure.classification, failure.message
        result.score = counted_score(failure.classification, result.termination_reason, None)
        return
    assert state.evaluation is not None and outcome is not None
    result.status = "completed"
    result.evaluator_score = state.evaluation.score
    result.getters_read_nothing = state.evaluation.getters_read_nothing  # the score stands; summary.md lists them
    result.score = counted_score(None, outcome.termination_reason, state.evaluation.score)
