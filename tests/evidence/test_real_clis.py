"""Real tier: for each of the four real CLIs the scripted model plays steps (with words beside its calls, and a
rate limit that ends the first turn, so the session is resumed), and the trajectory collect_evidence builds holds
exactly those tool calls, in order, each action with the screen after it, and the gateway's token counts. The same
run is each CLI's end-to-end check as a CLI: the resumed session typed its command into the guest's terminal, the
tool calls each CLI reports, every model call counted once against the scope's secret, and no upstream credential
anywhere in the guest."""

from __future__ import annotations

import os
import signal
import threading
import time

import orjson
import pytest

from hcu.demo.stand_in import STAND_IN_TOKEN
from hcu.osworld.errors import Interrupted
from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.layout import TRAJECTORY_FILE
from hcu.osworld.records.result import TaskResult
from hcu.osworld.records.usage import usage_for_scope
from hcu.record_io import write_record
from tests.evidence.live_agent import PROMPT, live_run, policy
from tests.evidence.played import AGENTS, FINAL, STEPS, THROTTLED, agent_calls, assert_played, assert_screens

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]

EXTRA_CALLS = {"codex": 0, "claude-code": 0, "gemini-cli": 0, "grok-build": 1}
"""Side calls that reach the gateway besides the policy's steps (Grok's session title)."""
REPORTED_TOOL_CALLS = {"codex": 5, "claude-code": 5, "gemini-cli": 5, "grok-build": 0}
"""Tool calls the CLIs' event streams report over both turns (Grok 0.2.111 reports none)."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("agent", AGENTS)
def test_trajectory_holds_the_played_calls_in_order_with_screens(agent, tmp_path):
    with live_run(agent, tmp_path, policy(STEPS, final=FINAL, faults=[THROTTLED])) as run:
        outcome = run.run_agent()
        assert outcome.turns == 2 and outcome.protocol_word == "TASK_COMPLETE", outcome
        assert outcome.rate_limit_resumes == 1 and outcome.tool_calls == REPORTED_TOOL_CALLS[agent], outcome
        trajectory = run.collect(outcome.termination_reason)
        _, typed, _ = run.guest.run(["cat", "/home/user/evidence.txt"])
        assert typed.strip() == "evidence", "the resumed session's command ran in the guest's terminal"
        leak_check = (f"grep -rl {STAND_IN_TOKEN} /home/user /tmp 2>/dev/null; "
                      f"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {STAND_IN_TOKEN}")
        assert run.guest.run(["sh", "-c", leak_check])[1].strip() == "0", "the upstream credential reached the guest"
    rows = [orjson.loads(line) for line in run.token_log.read_bytes().splitlines()]
    mine = [r for r in rows if r["task"] == run.ctx.scope]
    assert [r["outcome"] for r in mine].count("rate_limited") >= 1, "the first turn ended on the gateway's verdict"
    assert sum(r["counted"] for r in mine) == len(STEPS) + 1 + EXTRA_CALLS[agent], mine
    on_disk = Trajectory.model_validate_json((run.result_dir / TRAJECTORY_FILE).read_bytes())
    assert on_disk == trajectory
    assert_played(trajectory, run.result_dir, run.token_log, run.ctx.scope, PROMPT)
    # a container shares the host's clock: what is read of the offset lies within its round trip, and is none
    assert trajectory.extra["clock_offset_sec"] == 0.0 and trajectory.extra["dropped"] == []
    assert trajectory.extra["collect_errors"] == []
    usage = usage_for_scope(run.token_log, run.ctx.scope)
    write_record(run.result_dir / "result.json", TaskResult(status="completed", usage=usage))
    mode = (run.result_dir / "result.json").stat().st_mode & 0o777
    kept = [run.result_dir / TRAJECTORY_FILE, *(run.result_dir / "steps").iterdir()]
    assert {path.stat().st_mode & 0o777 for path in kept} == {mode}, "evidence carries the results' permissions"


@pytest.mark.timeout(300)
def test_an_attempt_cut_by_the_budget_keeps_its_trajectory(tmp_path):
    steps = [{"tool": "click", "arguments": {"x": 50, "y": 60}}]
    with live_run("codex", tmp_path, policy(steps, never_finish=True), max_model_calls=3) as run:
        outcome = run.run_agent()
        assert outcome.termination_reason == "max_model_calls", outcome
        trajectory = run.collect(outcome.termination_reason)
    calls = agent_calls(trajectory)
    assert [(tool, args) for tool, args, _ in calls] == [("click", {"x": 50, "y": 60})] * 3
    assert_screens(run.result_dir, calls)
    assert [r["outcome"] for r in trajectory.extra["unanswered_requests"]] == ["refused_budget"]
    assert trajectory.extra["ended"] == "max_model_calls"
    assert trajectory.final_metrics.extra["model_calls"] == 3


@pytest.mark.timeout(300)
def test_an_attempt_stopped_by_a_signal_keeps_its_trajectory(tmp_path):
    """The runner is stopped mid-turn: no turn kept its events, the CLI is still running when the collect phase
    reads the guest, and the calls computer-use recorded make the trajectory."""
    steps = [{"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}}, {"tool": "wait", "arguments": {"seconds": 30}}]
    with live_run("claude-code", tmp_path, policy(steps)) as run:
        stops = StopSignals()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        watcher = threading.Thread(target=_signal_during_second_call, args=(run,), daemon=True)
        try:
            stops.install()
            watcher.start()
            with pytest.raises(Interrupted), stops.armed():
                run.run_agent()
        finally:
            watcher.join(timeout=60)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        trajectory = run.collect("interrupted")
    calls = agent_calls(trajectory)
    assert [tool for tool, _, _ in calls] == ["key", "wait"]
    assert calls[0][1] == steps[0]["arguments"] and calls[0][2].screenshot
    assert calls[1][2].extra.in_flight and calls[1][2].extra.guest_ended_at is None, "the wait was cut short"
    assert all(result.extra.recorded_by == ["computer-use"] for _, _, result in calls)
    assert not list(run.result_dir.glob("phase-agent-turn-*")), "the stopped turn kept no events"
    assert trajectory.extra["ended"] == "interrupted"


def _signal_during_second_call(run) -> None:
    deadline = time.monotonic() + 120
    while len(run.guest_records("begin")) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGTERM)
