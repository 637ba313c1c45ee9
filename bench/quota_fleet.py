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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench.quota_profile import MODEL, PRICES, AttemptPlan, call_headers, request_body
from bench.quota_world import SimClock, World
from hcu.defaults import RETRIES
from hcu.osworld.queue.config import TaskSpec
from hcu.osworld.queue.executor import Lost
from hcu.osworld.queue.manifest import NodeInfo
from hcu.osworld.queue.state import TaskView
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport, fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import AttemptLease, current_host
from hcu.osworld.records.result import PhaseTiming, TaskResult, Usage
from hcu.osworld.settings import LimitSettings
from hcu.record_io import write_json, write_record

RESUME_DELAY_SEC = LimitSettings.model_fields["rate_limit_resume_delay"].default
CLIENT_TIMEOUT_SEC = 120.0
"""Real seconds: the gateway answers every call within its rate-limit waits, compressed."""


@dataclass
class AttemptRecord:
    """What one attempt did, in simulated seconds."""

    key: str
    attempt: int
    launched_at: float
    ended_at: float = 0.0
    outcome: str = "running"
    """valid, upstream_rate_limit, or upstream_error."""
    gateway_wait_sec: float = 0.0
    resume_wait_sec: float = 0.0
    tokens: int = 0
    """Input (cached included) and output of its completed calls."""
    cost_usd: float = 0.0

    @property
    def held_sec(self) -> float:
        """How long the attempt held its guest."""
        return self.ended_at - self.launched_at


@dataclass
class Tally:
    """What the agent phase used, as the token log will say it."""

    calls: int = 0
    requests: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    def take(self, usage: dict) -> None:
        self.calls += 1
        self.input_tokens += usage.get("input_tokens", 0)
        self.cached_input_tokens += (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)
        self.output_tokens += usage.get("output_tokens", 0)

    def cost(self) -> float:
        price = PRICES[MODEL]
        return ((self.input_tokens - self.cached_input_tokens) * price["input_usd_per_mtok"]
                + self.cached_input_tokens * price["cached_input_usd_per_mtok"]
                + self.output_tokens * price["output_usd_per_mtok"]) / 1e6


@dataclass
class StandInFleet:
    """The executor: stand-in attempts on the world's loop, on `plans` by task id."""

    world: World
    plans: dict[str, AttemptPlan]
    run_id: str
    name: str = "stand-in"
    records: list[AttemptRecord] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

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
        record = AttemptRecord(attempt.task_key, attempt.attempt, now)
        with self.lock:
            self.records.append(record)
        self.world.submit(self._attempt(attempt, task_dir, record))
        return ActiveAttempt(task.id, attempt.attempt, os.getpid(), now, False, task_dir, "sim", attempt.repeat)

    async def _attempt(self, attempt: AttemptId, task_dir: Path, record: AttemptRecord) -> None:
        plan, phases = self.plans[attempt.task_id], []
        try:
            await self._phase(task_dir, "setup", plan.boot_setup_sec, phases)
            agent_started = self.clock.now()
            write_json(task_dir / "progress.json", {"phase": "agent", "since": agent_started})
            tally = Tally()
            outcome, resumes = await self._agent(attempt, plan, tally, record)
            phases.append(PhaseTiming(name="agent", started_at=agent_started,
                                      duration_sec=self.clock.now() - agent_started))
            if outcome == "valid":
                await self._phase(task_dir, "evaluate", plan.evaluate_sec, phases)
            record.gateway_wait_sec = self.world.waited(attempt.gateway_scope)
            usage = Usage(model_calls=tally.calls, requests=tally.requests, input_tokens=tally.input_tokens,
                          cached_input_tokens=tally.cached_input_tokens, output_tokens=tally.output_tokens,
                          rate_limit_wait_sec=record.gateway_wait_sec, fully_accounted=True)
            ended = {"status": "completed", "score": 1.0} if outcome == "valid" else {
                "status": "error", "score": None, "failure_classification": outcome,
                "failure_message": f"the agent's turn ended on the gateway's {outcome} after {resumes} resumes"}
            record.ended_at, record.outcome = self.clock.now(), outcome
            record.tokens, record.cost_usd = tally.input_tokens + tally.output_tokens, tally.cost()
            write_record(task_dir / "result.json", TaskResult(
                **ended, task_id=attempt.task_id, repeat=attempt.repeat, attempt=attempt.attempt, run_id=self.run_id,
                attempt_id=str(attempt), agent="codex", model=MODEL, duration_sec=record.held_sec, phases=phases,
                usage=usage, cost_usd=round(tally.cost(), 6), rate_limit_resumes=resumes))
        except Exception as exc:  # a stand-in that breaks is the benchmark's fault: said at the end
            record.outcome = f"crashed: {exc!r}"[:200]
        finally:
            with self.lock:
                self.done.add(attempt.task_key)

    async def _phase(self, task_dir: Path, name: str, seconds: float, phases: list[PhaseTiming]) -> None:
        started = self.clock.now()
        write_json(task_dir / "progress.json", {"phase": name, "since": started})
        await self.clock.asleep(seconds)
        phases.append(PhaseTiming(name=name, started_at=started, duration_sec=self.clock.now() - started))

    async def _agent(self, attempt: AttemptId, plan: AttemptPlan, tally: Tally,
                     record: AttemptRecord) -> tuple[str, int]:
        """Every call of the plan in order; the outcome (valid, upstream_rate_limit, upstream_error) and the
        session resumes it took."""
        scope, step, resumes = attempt.gateway_scope, 0, 0
        url = f"{self.world.gateway_url}/t/{scope}/v1/responses"
        timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_SEC)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while step < len(plan.calls):
                call = plan.calls[step]
                body = orjson.dumps(request_body(step, scope, plan))
                headers = {"Authorization": "Bearer placeholder", "Content-Type": "application/json",
                           **call_headers(call)}
                async with session.post(url, data=body, headers=headers) as response:
                    answer = await response.read()
                tally.requests += 1
                if response.status == 200 and (usage := _completed_usage(answer)) is not None:
                    tally.take(usage)
                    await self.clock.asleep(call.action_sec)
                    step += 1
                elif response.status != 429:
                    return "upstream_error", resumes
                elif resumes == RETRIES.rate_limit_resumes:
                    return "upstream_rate_limit", resumes
                else:
                    resumes += 1
                    record.resume_wait_sec += RESUME_DELAY_SEC
                    await self.clock.asleep(RESUME_DELAY_SEC)
        return "valid", resumes

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        with self.lock:
            finished = [a.key for a in active if a.key in self.done]
            self.done.difference_update(finished)
        return finished

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        raise AssertionError("a fresh run adopts nothing")

    def settle(self, active: ActiveAttempt) -> Lost | None:
        return None

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
