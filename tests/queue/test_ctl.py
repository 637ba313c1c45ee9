"""`python -m hcu.osworld.ctl` against a real running queue (the stand-in runner, attempts held until the test
lets them end): pause holds launches while running attempts finish, set changes the limit at the next poll,
resume launches again, drain exits once the running attempts are done; a queue killed and started again keeps
the pause and the values set gave."""

from __future__ import annotations

import signal

import pytest

from hcu.osworld.queue.state import runs_attempt
from tests.queue.conftest import wait_for
from tests.queue.ctl_session import (
    WAIT_SEC,
    after,
    control_event,
    ctl,
    events,
    held,
    release,
    snapshot_when,
    start_queue,
)

pytestmark = pytest.mark.docker

TASKS = [f"t{i}" for i in range(8)]


def launched(run_dir) -> list[str]:
    return [e["task_id"] for e in after(run_dir, None, "launch")]


def test_pause_set_resume_drain_on_a_running_queue(make_panel, tmp_path) -> None:
    panel = make_panel(TASKS, max_active_tasks=2, sleep_sec=(0.05, 0.1), scenario=held(tmp_path, TASKS))
    run_dir = panel.run_dir
    queue = start_queue(panel)
    try:
        wait_for(lambda: len(launched(run_dir)) == 2, WAIT_SEC, "two launches")
        paused = ctl(run_dir, "pause")
        assert paused.returncode == 0 and paused.stdout.startswith("launches paused"), paused
        first = launched(run_dir)
        release(tmp_path, *first)
        snapshot = snapshot_when(run_dir, lambda s: s.running == 0 and s.done == 2, "the running attempts to end")
        assert snapshot.state == "paused" and snapshot.paused
        assert after(run_dir, control_event(run_dir, "pause"), "launch") == [], "a launch while paused"

        unknown = ctl(run_dir, "set", "max_attempts=3")
        assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1, unknown
        assert "max_attempts: unknown key" in unknown.stderr
        changed = ctl(run_dir, "set", "max_active_tasks=3")
        assert (changed.returncode, changed.stdout) == (0, "max_active_tasks: 2 -> 3\n"), changed
        snapshot = snapshot_when(run_dir, lambda s: s.limit == 3, "the new limit in the figures")
        assert snapshot.limit_reason == "max_active_tasks (ctl set)" and snapshot.set_by_ctl == ["max_active_tasks"]
        limits = [(e["limit"], e["previous"]) for e in events(run_dir) if e["event"] == "limit"]
        assert limits == [(2, None), (3, 2)]
        assert after(run_dir, control_event(run_dir, "pause"), "launch") == [], "a launch while paused"
        status = ctl(run_dir, "status")
        assert status.returncode == 0 and "3 at once (max_active_tasks (ctl set))" in status.stdout

        assert ctl(run_dir, "resume").returncode == 0
        wait_for(lambda: len(launched(run_dir)) == 5, WAIT_SEC, "three launches after resume")
        snapshot = snapshot_when(run_dir, lambda s: s.running == 3, "three attempts running")
        drained = ctl(run_dir, "drain")
        assert drained.returncode == 0 and drained.stdout.startswith("draining"), drained
        snapshot = snapshot_when(run_dir, lambda s: s.state == "draining", "the queue draining")
        assert queue.poll() is None, "the queue exited before its running attempts finished"
        release(tmp_path, *TASKS)
        assert queue.wait(timeout=WAIT_SEC) == 0, queue.stderr.read() if queue.stderr else ""
    finally:
        queue.kill()
        queue.wait()
    assert "drained (ctl drain): 3 repeats not started" in (queue.stdout.read() if queue.stdout else "")
    assert after(run_dir, control_event(run_dir, "drain"), "launch") == [], "a launch while draining"
    assert sorted(launched(run_dir)) == sorted(TASKS[:5])
    for task in TASKS[5:]:
        assert not (run_dir / "tasks" / task).exists(), f"{task} started although the queue was draining"
    for task in TASKS[:5]:
        assert (run_dir / "tasks" / task / "result.json").exists(), f"{task} left without a result"
    assert not [e for e in panel.events() if e["event"] == "start" and runs_attempt(e["pid"], run_dir)]
    assert [e["command"] for e in events(run_dir) if e["event"] == "control"] == [
        "pause", "set", "resume", "drain"], "one event per command taken (the refused key was never sent)"
    assert events(run_dir)[-1]["event"] == "drained"
    assert snapshot_when(run_dir, lambda s: s.state == "drained", "the last figures").pending == 3


def test_a_queue_killed_and_started_again_keeps_the_pause_and_what_set_gave(make_panel, tmp_path) -> None:
    tasks = TASKS[:4]
    panel = make_panel(tasks, max_active_tasks=1, sleep_sec=(0.05, 0.1), scenario=held(tmp_path, tasks))
    run_dir = panel.run_dir
    queue = start_queue(panel)
    try:
        wait_for(lambda: len(launched(run_dir)) == 1, WAIT_SEC, "the first launch")
        assert ctl(run_dir, "pause").returncode == 0
        assert ctl(run_dir, "set", "max_active_tasks=2").returncode == 0
        queue.send_signal(signal.SIGKILL)
        queue.wait(timeout=WAIT_SEC)
        restart = after(run_dir, None, "start")
        queue = start_queue(panel)
        wait_for(lambda: len(after(run_dir, None, "start")) == len(restart) + 1, WAIT_SEC, "the second start")
        second = after(run_dir, None, "start")[-1]
        restored = after(run_dir, second, "control_restored")
        assert [(e["paused"], e["settings"]) for e in restored] == [(True, {"max_active_tasks": 2})]
        snapshot = snapshot_when(run_dir, lambda s: s.pid == queue.pid and s.running == 1,
                                 "the restarted queue's figures")
        assert snapshot.state == "paused"
        assert (snapshot.limit, snapshot.limit_reason) == (2, "max_active_tasks (ctl set)")
        release(tmp_path, tasks[0])
        snapshot_when(run_dir, lambda s: s.done == 1 and s.running == 0, "the adopted attempt to end")
        assert after(run_dir, second, "launch") == [], "the restarted queue launched while paused"
        assert ctl(run_dir, "resume").returncode == 0
        wait_for(lambda: len(after(run_dir, second, "launch")) == 2, WAIT_SEC, "two launches at once")
        release(tmp_path, *tasks)
        assert queue.wait(timeout=WAIT_SEC) == 0, queue.stderr.read() if queue.stderr else ""
    finally:
        queue.kill()
        queue.wait()
    assert ctl(run_dir, "status").returncode == 2, "a queue that has exited cannot be asked"
