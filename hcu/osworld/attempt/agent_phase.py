"""The agent phase: run the CLI in the guest until it finishes, is refused by the budget, times out, stalls,
or keeps ending on rate limits; resume the same session after a rate-limited turn.

Deadlines follow the reference: gateway rate-limit waits and the resume delays are added to both the timeout
and the no-progress limit, so waiting on the provider never truncates a task.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import BaseModel

from hcu.gateway.budget import TaskStateView
from hcu.osworld.agents.base import AgentAdapter, AgentPlan, TurnOutcome
from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.attempt.result import ProtocolWord, TerminationReason
from hcu.osworld.attempt.scope_credential import GatewayCredential
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.guest.process import GuestProcess
from hcu.record_io import write_atomic

log = logging.getLogger("hcu.run_task")

MAX_RATE_LIMIT_RESUMES = 2
MAX_TURNS = 8
"""Rate-limit resumes plus resumes after upstream failures: the gateway ends the task at five failures in a row
well before this, so it only bounds a gateway that never says so."""


@dataclass
class AgentLimits:
    timeout_sec: float = 0.0
    """0 = no timeout."""
    no_progress_sec: float = 900.0
    resume_delay_sec: float = 60.0
    poll_sec: float = 2.0


class AgentOutcome(BaseModel):
    termination_reason: TerminationReason
    protocol_word: ProtocolWord | None = None
    final_message: str | None = None
    failure_classification: str | None = None
    failure_message: str | None = None
    turns: int = 0
    rate_limit_resumes: int = 0
    tool_calls: int = 0

    @property
    def last_action(self) -> str | None:
        """OSWorld's view of how the agent ended: "FAIL" for TASK_INFEASIBLE (scores infeasible tasks)."""
        return "FAIL" if self.protocol_word == "TASK_INFEASIBLE" else "DONE"


@dataclass
class _Watch:
    """Progress signals of one turn (output growth, gateway activity) and when they last changed."""

    last_progress: float
    seen: tuple = field(default_factory=tuple)


def run_agent(api: GuestAPI, adapter: AgentAdapter, plan: AgentPlan, *, gateway_url: str, scope: str,
              work_dir: str, state_dir: str, result_dir: Path, limits: AgentLimits,
              credential: GatewayCredential) -> AgentOutcome:
    started = time.monotonic()
    waited_sec = 0.0  # resume delays, added to the deadlines like gateway waits
    tool_calls = rate_limit_resumes = 0
    trace = result_dir / "agent.jsonl"
    trace.unlink(missing_ok=True)
    argv = plan.run_argv
    for turn in range(1, MAX_TURNS + 1):
        proc = GuestProcess(api, state_dir, f"agent-turn-{turn}")
        proc.start(argv, env=plan.env, cwd=work_dir)
        stop = _watch(proc, gateway_url, scope, credential, started, waited_sec, limits)
        if stop is not None:
            proc.kill()
        outcome = _collect_turn(adapter, proc, turn, result_dir, trace, credential)
        tool_calls += outcome.tool_calls
        state = _state(gateway_url, scope, credential)
        end = _turn_end(stop, outcome, state)
        common = dict(turns=turn, rate_limit_resumes=rate_limit_resumes, tool_calls=tool_calls,
                      protocol_word=outcome.protocol_word, final_message=outcome.final_message)
        if end == "rate_limited" and rate_limit_resumes == MAX_RATE_LIMIT_RESUMES:
            return AgentOutcome(termination_reason="completed", failure_classification="upstream_rate_limit",
                                failure_message=f"turn {turn} ended on a rate limit after {turn - 1} resumes",
                                **common)
        if end not in ("rate_limited", "upstream_failed"):
            return _final(end, outcome, **common)
        rate_limit_resumes += end == "rate_limited"
        log.info("turn %d ended on %s; resuming the session in %.0fs", turn, end, limits.resume_delay_sec)
        time.sleep(limits.resume_delay_sec)
        waited_sec += limits.resume_delay_sec
        argv = plan.resume_argv
    return AgentOutcome(termination_reason="completed", failure_classification="upstream_failures",
                        failure_message=f"{MAX_TURNS} turns ended on upstream failures", turns=MAX_TURNS,
                        rate_limit_resumes=rate_limit_resumes, tool_calls=tool_calls)


def _turn_end(stop: str | None, outcome: TurnOutcome, state: TaskStateView) -> str:
    """Why a turn ended, in the order that decides the attempt: the gateway's verdicts first, then the CLI's."""
    if stop == "gateway_failed" or state.failed:
        return "gateway_failed"
    if stop is not None:
        return stop  # "timeout" or "no_progress"
    if outcome.refused_budget or state.refused:
        return "budget"
    if outcome.succeeded or outcome.protocol_word:
        return "finished"
    if outcome.ended_on_rate_limit:
        return "rate_limited"
    # The CLI gave up on an upstream error (it retries less than the gateway's five-in-a-row rule needs): the
    # model never decided anything, so the session resumes rather than reading as an agent failure.
    return "upstream_failed" if state.failed_in_a_row else "agent_quit"


def _final(end: str, outcome: TurnOutcome, **common: object) -> AgentOutcome:
    if end == "gateway_failed":
        return AgentOutcome(termination_reason="completed", failure_classification="upstream_failures",
                            failure_message="five consecutive failed generations at the gateway", **common)
    if end in ("timeout", "no_progress"):
        return AgentOutcome(termination_reason="timeout", failure_message=f"agent stopped by the "
                            f"{end.replace('_', ' ')} limit", **common)
    if end == "budget":
        return AgentOutcome(termination_reason="max_model_calls", **common)
    failure = None if end == "finished" else (outcome.error or "the agent ended without a protocol word")
    return AgentOutcome(termination_reason="completed", failure_message=failure, **common)


def _watch(proc: GuestProcess, gateway_url: str, scope: str, credential: GatewayCredential, started: float,
           waited_sec: float, limits: AgentLimits) -> str | None:
    """Poll until the process exits (None) or a limit is hit ("timeout", "no_progress", "gateway_failed")."""
    now = time.monotonic()
    watch = _Watch(last_progress=now)
    while True:
        time.sleep(limits.poll_sec)
        status = proc.status()
        state = _state(gateway_url, scope, credential)
        if not status.alive:
            return None
        if state.failed:
            return "gateway_failed"
        now = time.monotonic()
        signals = (status.stdout_bytes, state.calls_used, state.last_activity_at, state.rate_limit_waits)
        if signals != watch.seen or state.waiting_now:
            watch.seen, watch.last_progress = signals, now
        grace = state.rate_limit_wait_sec + waited_sec
        if limits.timeout_sec and now - started > limits.timeout_sec + grace:
            return "timeout"
        if limits.no_progress_sec and now - watch.last_progress > limits.no_progress_sec:
            return "no_progress"


def _state(gateway_url: str, scope: str, credential: GatewayCredential) -> TaskStateView:
    return gateway_health(gateway_url, task=scope, secret=credential.secret).task or TaskStateView(task=scope)


def _collect_turn(adapter: AgentAdapter, proc: GuestProcess, turn: int, result_dir: Path,
                  trace: Path, credential: GatewayCredential) -> TurnOutcome:
    """Keep the turn's raw output as evidence (without the scope secret), parse it, and append its events to
    agent.jsonl."""
    stdout, stderr = credential.redact(proc.read_stdout()), credential.redact(proc.read_stderr())
    write_atomic(result_dir / f"phase-agent-turn-{turn}-events.jsonl", stdout)
    write_atomic(result_dir / f"phase-agent-turn-{turn}-stderr.log", stderr)
    outcome = adapter.parse_events(stdout.decode("utf-8", "replace"))
    with trace.open("ab") as f:
        for item in outcome.turns:
            f.write(orjson.dumps({"turn": turn, **item}) + b"\n")
    return outcome
