"""bench_quota.py's fleet: an executor whose attempts are stand-ins that hold a (simulated) guest through boot and
setup, an agent phase whose model calls go through the real gateway (the profile of quota_profile.py), and an
evaluation, then write result.json and progress.json as run_task does.

The stand-in agent is a CLI that does not retry on its own: a call the gateway answers 429 (its rate-limit waits
reached `rate_limit_max_wait`) ends the turn on a rate limit. As run_task does (attempt/agent_phase.py), the
session is then resumed after `rate_limit_resume_delay` at the step it was on, at most RETRIES.rate_limit_resumes
times; a turn that still ends on a rate limit ends the attempt as `upstream_rate_limit`, which the queue retries.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench.fresh_run import FreshRun
from bench.quota_profile import MAX_OUTPUT_TOKENS, MODEL, PRICES, AttemptPlan, call_headers, prompt_at, request_body
from bench.quota_world import SimClock, World
from hcu.defaults import RETRIES
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport, fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import AttemptLease, current_host
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.records.result import PhaseTiming, TaskResult, Usage
from hcu.osworld.run_config import TaskSpec
from hcu.osworld.settings import LimitSettings
from hcu.record_io import write_json, write_record

RESUME_DELAY_SEC = LimitSettings.model_fields["rate_limit_resume_delay"].default
CLIENT_TIMEOUT_SEC = 120.0
"""Real seconds: the gateway answers every call within its rate-limit waits, compressed."""


@dataclass(frozen=True)
class CallDone:
    """A model call the attempt completed."""

    at: float
    charged: int
    """What the quota charged it (its prompt and reserved output)."""
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int

    @property
    def tokens(self) -> int:
        """As the forecast counts tokens: input (cached included) and output."""
        return self.input_tokens + self.output_tokens

    @property
    def cost_usd(self) -> float:
        price = PRICES[MODEL]
        return ((self.input_tokens - self.cached_input_tokens) * price["input_usd_per_mtok"]
                + self.cached_input_tokens * price["cached_input_usd_per_mtok"]
                + self.output_tokens * price["output_usd_per_mtok"]) / 1e6


@dataclass
class AttemptRecord:
    """What one attempt did, in simulated seconds."""

    key: str
    attempt: int
    launched_at: float
    charged: int
    """What its whole plan is charged."""
    ended_at: float = 0.0
    outcome: str = "running"
    """valid, upstream_rate_limit, or upstream_error."""
    gateway_wait_sec: float = 0.0
    resumes: list[tuple[float, float]] = field(default_factory=list)
    """The resume delays after its rate-limited turns: (from, to)."""
    calls: list[CallDone] = field(default_factory=list)

    @property
    def held_sec(self) -> float:
        """How long the attempt held its guest."""
        return self.ended_at - self.launched_at

    def held_within(self, start: float, end: float) -> float:
        """Guest-held seconds between `start` and `end` (an attempt still running holds it up to `end`)."""
        return max(0.0, min(end, self.ended_at or end) - max(start, self.launched_at))

    def resumed_within(self, start: float, end: float) -> float:
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.resumes)

    def calls_within(self, start: float, end: float) -> list[CallDone]:
        return [call for call in self.calls if start < call.at <= end]


def usage_of(calls: list[CallDone], requests: int, waited: float) -> Usage:
    """The attempt's usage as the gateway's token log gives it (requests: every call it made)."""
    return Usage(model_calls=len(calls), requests=requests, input_tokens=sum(c.input_tokens for c in calls),
                 cached_input_tokens=sum(c.cached_input_tokens for c in calls),
                 output_tokens=sum(c.output_tokens for c in calls), rate_limit_wait_sec=waited, fully_accounted=True)


def call_done(at: float, charged: int, usage: dict) -> CallDone:
    return CallDone(at, charged, usage.get("input_tokens", 0),
                    (usage.get("input_tokens_details") or {}).get("cached_tokens", 0), usage.get("output_tokens", 0))


@dataclass
class StandInFleet(FreshRun):
    """The executor: stand-in attempts on the world's loop, on `plans` by task id."""

    world: World
    plans: dict[str, AttemptPlan]
    run_id: str
    name: str = "stand-in"
    records: list[AttemptRecord] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: list[Future[None]] = field(default_factory=list)

    @property
    def clock(self) -> SimClock:
        return self.world.clock

    def capacity(self) -> int | None:
        return None

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        now = self.clock.now()
        write_record(task_dir / "attempt.json", AttemptLease(
            attempt_id=str(attempt), run_id=attempt.run_id, task_id=attempt.task_id, attempt=attempt.attempt,
            repeat=attempt.repeat, pid=os.getpid(), host=current_host(), started_at=now, result_dir=str(task_dir)))
        record = AttemptRecord(attempt.task_key, attempt.attempt, now, self.plans[attempt.task_id].charged_tokens)
        with self.lock:
            self.records.append(record)
        self.running = [*(f for f in self.running if not f.done()), self.world.submit(
            self._attempt(attempt, task_dir, record))]
        return ActiveAttempt(task.id, attempt.attempt, os.getpid(), now, False, task_dir, "sim", attempt.repeat)

    async def _attempt(self, attempt: AttemptId, task_dir: Path, record: AttemptRecord) -> None:
        plan, phases = self.plans[attempt.task_id], []
        try:
            await self._phase(task_dir, "setup", plan.boot_setup_sec, phases)
            agent_started = self.clock.now()
            write_json(task_dir / "progress.json", {"phase": "agent", "since": agent_started})
            outcome, resumes, requests = await self._agent(attempt, plan, record)
            phases.append(PhaseTiming(name="agent", started_at=agent_started,
                                      duration_sec=self.clock.now() - agent_started))
            if outcome == "valid":
                await self._phase(task_dir, "evaluate", plan.evaluate_sec, phases)
            record.gateway_wait_sec = self.world.waited(attempt.gateway_scope)
            usage = usage_of(record.calls, requests, record.gateway_wait_sec)
            ended = {"status": "completed", "score": 1.0} if outcome == "valid" else {
                "status": "error", "score": None, "failure_classification": outcome,
                "failure_message": f"the agent's turn ended on the gateway's {outcome} after {resumes} resumes"}
            record.ended_at, record.outcome = self.clock.now(), outcome
            write_record(task_dir / "result.json", TaskResult(
                **ended, task_id=attempt.task_id, repeat=attempt.repeat, attempt=attempt.attempt, run_id=self.run_id,
                attempt_id=str(attempt), agent="codex", model=MODEL, duration_sec=record.held_sec, phases=phases,
                usage=usage, cost_usd=round(sum(c.cost_usd for c in record.calls), 6), rate_limit_resumes=resumes))
        except Exception as exc:  # a stand-in that breaks is the benchmark's fault: said at the end
            record.ended_at, record.outcome = self.clock.now(), f"crashed: {exc!r}"[:200]  # its guest held no longer
        finally:
            with self.lock:
                self.done.add(attempt.task_key)

    async def _phase(self, task_dir: Path, name: str, seconds: float, phases: list[PhaseTiming]) -> None:
        started = self.clock.now()
        write_json(task_dir / "progress.json", {"phase": name, "since": started})
        await self.clock.asleep(seconds)
        phases.append(PhaseTiming(name=name, started_at=started, duration_sec=self.clock.now() - started))

    async def _agent(self, attempt: AttemptId, plan: AttemptPlan, record: AttemptRecord) -> tuple[str, int, int]:
        """Every call of the plan in order; the outcome (valid, upstream_rate_limit, upstream_error), the session
        resumes it took and the calls it made."""
        scope, step, resumes, requests = attempt.gateway_scope, 0, 0, 0
        url = f"{self.world.gateway_url}/t/{scope}/v1/responses"
        timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_SEC)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while step < len(plan.calls):
                call = plan.calls[step]
                body = orjson.dumps(request_body(step, scope))
                headers = {"Authorization": "Bearer placeholder", "Content-Type": "application/json",
                           **call_headers(call)}
                async with session.post(url, data=body, headers=headers) as response:
                    answer = await response.read()
                requests += 1
                if response.status == 200 and (usage := _completed_usage(answer)) is not None:
                    record.calls.append(call_done(self.clock.now(), prompt_at(step) + MAX_OUTPUT_TOKENS, usage))
                    await self.clock.asleep(call.action_sec)
                    step += 1
                elif response.status != 429:
                    return "upstream_error", resumes, requests
                elif resumes == RETRIES.rate_limit_resumes:
                    return "upstream_rate_limit", resumes, requests
                else:
                    resumes += 1
                    began = self.clock.now()
                    await self.clock.asleep(RESUME_DELAY_SEC)
                    record.resumes.append((began, self.clock.now()))
        return "valid", resumes, requests

    def stop(self) -> None:
        """End the attempts still running (the campaign's horizon)."""
        for future in self.running:
            future.cancel()

    def nodes(self) -> dict[str, NodeInfo]:
        return {}

    def gateway_reports(self) -> list[GatewayReport] | None:
        report = fetch_report(self.world.gateway_url, f"{self.run_id}.")
        return None if report is None else [report]

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        return None

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        return []

    def close(self, run_done: bool) -> None:
        return None


def _completed_usage(stream: bytes) -> dict | None:
    """The usage of a Responses stream's `response.completed` event (None: it did not complete)."""
    for line in stream.splitlines():
        if line.startswith(b"data: ") and b'"response.completed"' in line:
            event = orjson.loads(line[6:])
            return (event.get("response") or {}).get("usage") or {}
    return None
