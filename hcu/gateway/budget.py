"""Per-task budget and state: calls used, reservations, consecutive failures, rate-limit waits.

Everything runs on one event loop, so a check and the reservation that follows it (no `await` between them)
are atomic. A request that finds every remaining call reserved by in-flight requests waits until one of them
settles instead of being refused: a failed in-flight request frees its slot.

Only generations carry task state. Token counting, model listing, refused routes and invalid bodies neither
create a task's state nor move its failure count, so a scope that never generated costs nothing, and the
state of a scope that did is a few slots (the wake-up event exists only while a request waits for a slot).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import BaseModel

from hcu.gateway.clock import SYSTEM_CLOCK, Clock
from hcu.gateway.tokenlog import Outcome

FAILURES_TO_FAIL_TASK = 5
"""Consecutive failed generations (rate limits excluded) that mark a task failed."""


class TaskStateView(BaseModel):
    """A task's state as `/healthz?task=` reports it."""

    task: str
    calls_used: int = 0
    in_flight: int = 0
    failed_in_a_row: int = 0
    failed: bool = False
    rate_limit_wait_sec: float = 0.0
    rate_limit_waits: int = 0
    waiting_now: bool = False
    waiting_for_slot: int = 0
    """Requests waiting now for a budget slot that in-flight requests hold."""
    refused: int = 0
    """Generations refused for the budget."""
    last_activity_at: float | None = None
    refusals: dict[str, int] = {}
    """Every request of the scope the gateway answered without forwarding it, by kind (hcu.gateway.refusals)."""
    flooding: bool = False
    """The scope sent so many refused requests this interval that its requests are answered 429 unread."""
    log_bytes: int = 0
    """Bytes the scope's rows take in the token log."""
    log_ceiling_reached: bool = False
    """The scope's rows reached `max_log_bytes_per_scope`: the gateway serves it no more, and the runner ends
    the attempt as `guest_flood`."""


class ScopeWaits(BaseModel):
    """A scope's rate-limit waits as `/healthz?waits=` reports them: cumulative, so a reader takes differences."""

    wait_sec: float
    """Seconds waited in all, the waits in progress up to now included."""
    waits: int
    """Waits that ended."""
    waiting_now: int


@dataclass(slots=True)
class TaskState:
    calls_used: int = 0
    in_flight: int = 0
    failed_in_a_row: int = 0
    rate_limit_wait_sec: float = 0.0
    rate_limit_waits: int = 0
    waiting_now: int = 0
    waiting_began: float = 0.0
    """The sum of the clock's monotonic start times of the waits in progress: with `waiting_now`, how long
    they have waited so far."""
    waiting_for_slot: int = 0
    refused: int = 0
    failed: bool = False
    last_activity_at: float | None = None
    settled: asyncio.Event | None = None
    """Set when a reservation is released; exists only while some request waits for a slot."""

    def record(self, outcome: Outcome, counted: bool, generation: bool) -> None:
        """Apply the end of one request (its reservation, if any, is released separately)."""
        if counted:
            self.calls_used += 1
        if not generation:
            return
        if outcome == "success":
            self.failed_in_a_row = 0
        elif outcome == "failed":
            self.failed_in_a_row += 1
            self.failed = self.failed or self.failed_in_a_row >= FAILURES_TO_FAIL_TASK
        elif outcome == "refused_budget":
            self.refused += 1


class Budget:
    """Calls allowed per task and the state of every task that made a generation."""

    def __init__(self, max_requests_per_task: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.limit = max_requests_per_task
        self.clock = clock
        """0 = no budget (the run config's max_model_calls: 0)."""
        self.tasks: dict[str, TaskState] = {}

    def state(self, task: str) -> TaskState:
        st = self.tasks.get(task)
        if st is None:
            st = self.tasks[task] = TaskState()
        return st

    async def reserve(self, task: str) -> bool:
        """Reserve one call for `task`; False when its budget is used up. Waits while in-flight requests
        hold the remaining calls, because one of them may fail and free its slot."""
        st = self.state(task)
        if not self.limit:
            st.in_flight += 1
            return True
        while True:
            if st.calls_used >= self.limit:
                return False
            if st.calls_used + st.in_flight < self.limit:
                st.in_flight += 1
                return True
            if st.settled is None:
                st.settled = asyncio.Event()
            st.settled.clear()
            st.waiting_for_slot += 1
            try:
                await st.settled.wait()
            finally:
                st.waiting_for_slot -= 1

    def settle(self, task: str, reserved: bool, outcome: Outcome, counted: bool, generation: bool) -> int:
        """End one request: release its reservation, apply its outcome; returns the task's calls used."""
        st = self.tasks.get(task)
        if st is None:  # a call that never touched the budget, from a scope that never generated
            return 0
        if reserved:
            st.in_flight -= 1
            if st.settled is not None:
                st.settled.set()
                if st.in_flight == 0:
                    st.settled = None  # every waiter was woken and holds its own reference
        st.record(outcome, counted, generation)
        st.last_activity_at = self.clock.time()
        return st.calls_used

    def begin_wait(self, task: str) -> float:
        """A rate-limit wait of `task` starts now; returns its start (the clock's monotonic time)."""
        st, began = self.state(task), self.clock.monotonic()
        st.waiting_now += 1
        st.waiting_began += began
        return began

    def end_wait(self, task: str, began: float, waited: float) -> None:
        """The wait that started at `began` ended, after `waited` seconds."""
        st = self.state(task)
        st.waiting_now -= 1
        st.waiting_began -= began
        st.rate_limit_wait_sec += waited
        st.rate_limit_waits += 1

    def waits(self, prefix: str) -> dict[str, ScopeWaits]:
        """The rate-limit waits of every scope starting with `prefix` that has waited, the waits in progress
        counted up to now (`/healthz?waits=`)."""
        now = self.clock.monotonic()
        return {task: ScopeWaits(wait_sec=round(st.rate_limit_wait_sec + st.waiting_now * now - st.waiting_began, 3),
                                 waits=st.rate_limit_waits, waiting_now=st.waiting_now)
                for task, st in self.tasks.items()
                if task.startswith(prefix) and (st.rate_limit_waits or st.waiting_now)}

    def restore(self, tasks: dict[str, TaskState]) -> None:
        """Take every task's counters as rebuilt from the token log of an earlier run of this gateway."""
        self.tasks.update(tasks)

    def view(self, task: str) -> TaskStateView:
        st = self.tasks.get(task) or TaskState()
        return TaskStateView(
            task=task,
            calls_used=st.calls_used,
            in_flight=st.in_flight,
            failed_in_a_row=st.failed_in_a_row,
            failed=st.failed,
            rate_limit_wait_sec=round(st.rate_limit_wait_sec, 3),
            rate_limit_waits=st.rate_limit_waits,
            waiting_now=st.waiting_now > 0,
            waiting_for_slot=st.waiting_for_slot,
            refused=st.refused,
            last_activity_at=st.last_activity_at,
        )
