"""The agent phase: run the CLI in the guest until it finishes, is refused by the budget, times out, stalls,
or keeps ending on rate limits; resume the same session after a rate-limited turn, and only then.

Deadlines follow the reference: gateway rate-limit waits (the one in progress too) and the resume delays are
added to both the timeout and the no-progress limit, so waiting on the provider never truncates a task. How a
turn ended upstream is read from the gateway's token-log rows of the task's scope, not from the CLI's wording.
No message the reference does not define enters the conversation: a turn that ends on upstream failures ends
the attempt as an upstream error, which the queue retries.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import BaseModel

from hcu.defaults import RETRIES
from hcu.gateway.budget import TaskStateView
from hcu.osworld.agents.base import AgentAdapter, AgentPlan, TurnOutcome
from hcu.osworld.attempt.gateway_watch import SYSTEM_CLOCK, Clock, GatewayWatch, RateLimitWaits
from hcu.osworld.attempt.scope_credential import GatewayCredential
from hcu.osworld.errors import FailureClass
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.process import GuestProcess
from hcu.osworld.records.layout import TURN_EVENTS
from hcu.osworld.records.result import ProtocolWord, TerminationDetail, TerminationReason
from hcu.osworld.records.usage import last_generation_outcome
from hcu.osworld.settings import LimitSettings
from hcu.record_io import write_atomic

log = logging.getLogger("hcu.run_task")

POLL_SEC = 2.0
"""How often the agent's process, output and gateway state are looked at."""


@dataclass(frozen=True)
class AgentLimits:
    """The agent phase's limits, as the attempt's settings give them (0 = none)."""

    timeout_sec: float
    no_progress_sec: float
    resume_delay_sec: float
    gateway_away_sec: float
    """How long the gateway may not answer before the attempt ends as `gateway`."""
    poll_sec: float = POLL_SEC
    rate_limit_resumes: int = RETRIES.rate_limit_resumes
    """Session resumes after a turn that ended on a rate limit; then the attempt ends as `upstream_rate_limit`."""

    @classmethod
    def of(cls, settings: LimitSettings) -> AgentLimits:
        return cls(timeout_sec=settings.timeout_seconds, no_progress_sec=settings.no_progress_seconds,
                   resume_delay_sec=settings.rate_limit_resume_delay, gateway_away_sec=settings.gateway_away_seconds)


class AgentOutcome(BaseModel):
    termination_reason: TerminationReason
    termination_detail: TerminationDetail | None = None
    protocol_word: ProtocolWord | None = None
    final_message: str | None = None
    failure_classification: FailureClass | None = None
    failure_message: str | None = None
    turns: int = 0
    rate_limit_resumes: int = 0
    tool_calls: int = 0

    @property
    def last_action(self) -> str | None:
        """OSWorld's view of how the agent ended: "FAIL" for TASK_INFEASIBLE (scores infeasible tasks)."""
        return "FAIL" if self.protocol_word == "TASK_INFEASIBLE" else "DONE"


def run_agent(api: GuestAPI, adapter: AgentAdapter, plan: AgentPlan, *, gateway: GatewayWatch, work_dir: str,
              state_dir: str, result_dir: Path, limits: AgentLimits, token_log: Path | None,
              credential: GatewayCredential, clock: Clock = SYSTEM_CLOCK) -> AgentOutcome:
    started = clock.monotonic()
    waited_sec = 0.0  # resume delays, added to the deadlines like gateway waits
    tool_calls = rate_limit_resumes = 0
    trace = result_dir / "agent.jsonl"
    trace.unlink(missing_ok=True)
    argv = plan.run_argv
    turn = 0
    while True:
        turn += 1
        turn_started_at = time.time()
        proc = GuestProcess(api, state_dir, f"agent-turn-{turn}")
        proc.start(argv, env=plan.env, cwd=work_dir)
        stop = _watch(proc, gateway, started, waited_sec, limits, clock)
        if stop is not None:
            proc.kill()
        outcome = _collect_turn(adapter, proc, turn, result_dir, trace, credential)
        tool_calls += outcome.tool_calls
        gateway.poll()
        upstream = last_generation_outcome(token_log, gateway.scope, turn_started_at)
        end = _turn_end(stop, outcome, gateway.last, upstream)
        common = dict(turns=turn, rate_limit_resumes=rate_limit_resumes, tool_calls=tool_calls,
                      protocol_word=outcome.protocol_word, final_message=outcome.final_message)
        if end != "rate_limited":
            return _final(end, outcome, **common)
        if rate_limit_resumes == limits.rate_limit_resumes:
            return AgentOutcome(termination_reason="completed", failure_classification="upstream_rate_limit",
                                failure_message=f"turn {turn} ended on a rate limit after {turn - 1} resumes",
                                **common)
        rate_limit_resumes += 1
        log.info("turn %d ended on a rate limit; resuming the session in %.0fs", turn, limits.resume_delay_sec)
        clock.sleep(limits.resume_delay_sec)
        waited_sec += limits.resume_delay_sec
        argv = plan.resume_argv


def _turn_end(stop: str | None, outcome: TurnOutcome, state: TaskStateView, upstream: str | None) -> str:
    """Why a turn ended, in the order that decides the attempt: the gateway's verdicts first, then the CLI's.
    `upstream` is how the turn's last generation ended at the gateway (its token-log row)."""
    if stop == "gateway_failed" or state.failed:
        return "gateway_failed"
    if stop is not None:
        return stop  # "timeout" or "no_progress"
    if outcome.refused_budget or state.refused or upstream == "refused_budget":
        return "budget"
    if outcome.succeeded or outcome.protocol_word:
        return "finished"
    if upstream == "rate_limited":
        return "rate_limited"
    if upstream == "failed":
        return "upstream_failed"  # the CLI gave up on an upstream error before the gateway's five-in-a-row
    return "agent_quit"


def _final(end: str, outcome: TurnOutcome, **common: object) -> AgentOutcome:
    if end == "gateway_failed":
        return AgentOutcome(termination_reason="completed", failure_classification="upstream_error",
                            failure_message="five consecutive failed generations at the gateway", **common)
    if end == "upstream_failed":
        return AgentOutcome(termination_reason="completed", failure_classification="upstream_error",
                            failure_message=f"the agent CLI gave up after a failed generation at the gateway: "
                            f"{outcome.error or 'no error reported'}", **common)
    if end in ("timeout", "no_progress"):
        return AgentOutcome(termination_reason="timeout", termination_detail=end,
                            failure_message=f"agent stopped by the {end.replace('_', ' ')} limit", **common)
    if end == "budget":
        return AgentOutcome(termination_reason="max_model_calls", **common)
    failure = None if end == "finished" else (outcome.error or "the agent ended without a protocol word")
    return AgentOutcome(termination_reason="completed", failure_message=failure, **common)


def _watch(proc: GuestProcess, gateway: GatewayWatch, started: float, waited_sec: float, limits: AgentLimits,
           clock: Clock) -> str | None:
    """Poll until the process exits (None) or a limit is hit ("timeout", "no_progress", "gateway_failed")."""
    last_progress, seen = clock.monotonic(), None
    waits = RateLimitWaits()
    while True:
        clock.sleep(limits.poll_sec)
        status = proc.status()
        fresh = gateway.poll()
        state = gateway.last
        if not status.alive:
            return None
        if state.failed:
            return "gateway_failed"
        now = clock.monotonic()
        signals = (status.stdout_bytes, state.calls_used, state.last_activity_at, state.rate_limit_waits)
        if signals != seen or (fresh is not None and fresh.waiting_now):
            seen, last_progress = signals, now
        waited = waits.seconds(state, now) + waited_sec
        if limits.timeout_sec and now - started > limits.timeout_sec + waited:
            return "timeout"
        if limits.no_progress_sec and now - last_progress > limits.no_progress_sec:
            return "no_progress"


def _collect_turn(adapter: AgentAdapter, proc: GuestProcess, turn: int, result_dir: Path,
                  trace: Path, credential: GatewayCredential) -> TurnOutcome:
    """Keep the turn's raw output as evidence (without the scope secret), parse it, and append its events to
    agent.jsonl."""
    stdout, stderr = credential.redact(proc.read_stdout()), credential.redact(proc.read_stderr())
    write_atomic(result_dir / TURN_EVENTS.format(turn=turn), stdout)
    write_atomic(result_dir / f"phase-agent-turn-{turn}-stderr.log", stderr)
    outcome = adapter.parse_events(stdout.decode("utf-8", "replace"))
    with trace.open("ab") as f:
        for item in outcome.turns:
            f.write(orjson.dumps({"turn": turn, **item}) + b"\n")
    return outcome
