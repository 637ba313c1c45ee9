"""The collect side's one entry point: bring the guest's evidence home and write `trajectory.json`.

Works on whatever an attempt left, however it ended: a guest that is gone costs its call log and screenshots,
a turn that never ran costs its events, a missing token log costs the tokens; the trajectory says which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import orjson
from pydantic import BaseModel

from hcu.defaults import EVIDENCE
from hcu.osworld.agents import get_adapter
from hcu.osworld.agents.base import RESUME_PROMPT, AgentContext, Transcript
from hcu.osworld.evidence.atif import Agent, FinalMetrics, Step, Trajectory
from hcu.osworld.evidence.cli_trace import read_turns
from hcu.osworld.evidence.cost import ModelPrice, price_table
from hcu.osworld.evidence.generations import request_summary, scope_generations
from hcu.osworld.evidence.guest_calls import read_guest_log
from hcu.osworld.evidence.guest_fetch import TRANSCRIPT_NAME, bring_home
from hcu.osworld.evidence.join import agent_steps
from hcu.osworld.evidence.redact import Redactor
from hcu.osworld.guest.api import GuestAPI
from hcu.osworld.records.layout import TRAJECTORY_FILE
from hcu.osworld.records.usage import usage_for_scope
from hcu.record_io import write_atomic


class TrajectoryReport(BaseModel):
    """meta.json's word on trajectory.json: written (its ATIF version and how many steps), or not and why."""

    written: bool
    schema_version: str | None = None
    steps: int = 0
    agent_steps: int = 0
    """0: the attempt ended before the agent made a step (the trajectory holds its instruction, a valid ATIF
    trajectory all the same)."""
    why_not: str | None = None

    @classmethod
    def of(cls, trajectory: Trajectory) -> TrajectoryReport:
        return cls(written=True, schema_version=trajectory.schema_version, steps=len(trajectory.steps),
                   agent_steps=sum(step.source == "agent" for step in trajectory.steps))


def guest_evidence_dir(guest_root: str) -> str:
    """The folder the runner gives computer-use for the call log (`AgentContext.call_log_dir`)."""
    return f"{guest_root.rstrip('/')}/{EVIDENCE.guest_dir}"


def collect_evidence(
    api: GuestAPI | None,
    result_dir: Path,
    *,
    agent: str,
    ctx: AgentContext,
    agent_version: str | None,
    token_log: Path | None,
    ended: str | None,
    prices: Mapping[str, Mapping[str, float] | ModelPrice] | None = None,
    secrets: Sequence[str | None] = (),
    attempt_id: str | None = None,
    deadline_sec: float = EVIDENCE.collect_timeout_sec,
) -> Trajectory:
    """Write `<result_dir>/trajectory.json` for one attempt and return it.

    `api`: the guest (None when it is gone); `ctx`: the agent context the attempt ran with (instruction, scope,
    model, session, call-log folder); `ended`: why the attempt ended (termination reason or failure class);
    `prices`: model -> USD per million tokens; `secrets`: values never to keep (the scope secret)."""
    adapter = get_adapter(agent)
    redactor = Redactor(secrets)
    transcript = adapter.transcript(ctx)
    fetched = bring_home(api, result_dir, call_log_dir=ctx.call_log_dir,
                         transcript=transcript.guest_path if transcript else None, redactor=redactor,
                         deadline_sec=deadline_sec)
    log = read_guest_log(result_dir, fetched.clock_offset_sec or 0.0)
    turns = read_turns(result_dir, adapter, _transcript_turns(transcript, fetched.transcript, result_dir))
    scope = scope_generations(token_log, ctx.scope, price_table(prices))
    steps: list[Step] = [Step(step_id=0, source="user", message=ctx.prompt)]
    for number, made in agent_steps(turns, log, scope.generations, model=ctx.model, effort=ctx.effort):
        if number > 1:
            steps.append(Step(step_id=0, source="user", message=RESUME_PROMPT, extra={"turn": number}))
        steps += made
    for index, step in enumerate(steps, start=1):
        step.step_id = index
    usage = usage_for_scope(token_log, ctx.scope) if token_log is not None else None
    final = FinalMetrics(
        total_prompt_tokens=usage.input_tokens if usage else None,
        total_completion_tokens=usage.output_tokens if usage else None,
        total_cached_tokens=usage.cached_input_tokens if usage else None,
        total_cost_usd=scope.total_cost_usd, total_steps=len(steps),
        extra=usage.model_dump(include={"reasoning_tokens", "model_calls", "requests", "rate_limit_wait_sec",
                                        "fully_accounted"}) if usage else None,
    )
    trajectory = Trajectory(
        session_id=next((t.session_id for t in turns if t.session_id), None) or ctx.session_id,
        trajectory_id=attempt_id or ctx.scope,
        agent=Agent(name=agent, version=agent_version or "unknown", model_name=ctx.model,
                    extra={"effort": ctx.effort, "channels": ctx.channels, "code_mode": ctx.code_mode}),
        steps=steps, final_metrics=final,
        extra={
            "attempt_id": attempt_id, "scope": ctx.scope, "ended": ended,
            "size_cap_bytes": log.cap_bytes, "dropped": [*log.dropped, *fetched.dropped],
            "clock_offset_sec": fetched.clock_offset_sec, "clock_uncertainty_sec": fetched.clock_uncertainty_sec,
            "collect_errors": fetched.errors, "evidence_bytes": fetched.bytes,
            "unanswered_requests": [request_summary(r) for r in scope.unanswered],
            "unreadable_call_log_lines": log.unreadable_lines,
        },
    )
    trajectory = redactor.model(trajectory)
    write_atomic(result_dir / TRAJECTORY_FILE,
                 orjson.dumps(trajectory.model_dump(mode="json", exclude_none=True), option=orjson.OPT_INDENT_2))
    return trajectory


def _transcript_turns(transcript: Transcript | None, fetched: str | None, result_dir: Path) -> list[list[dict]] | None:
    """The CLI's transcript as brought home now, or as an earlier collect kept it (the guest may be gone since)."""
    if transcript is None:
        return None
    kept = result_dir / TRANSCRIPT_NAME
    if fetched is None and kept.is_file():
        fetched = kept.read_text(errors="replace")
    return transcript.parse(fetched) if fetched is not None else None
