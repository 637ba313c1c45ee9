"""The queue with a stand-in runner: concurrency, stagger, retries, pauses, refusals, stop and adopt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.defaults import RETRIES
from hcu.osworld.queue.panel import QueueRefused, QueueStopped, run_lock
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.lease import lease_for_this_process
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import write_record
from tests.queue.conftest import wait_for

pytestmark = pytest.mark.docker


def overlap_peak(events: list[dict]) -> int:
    """The most attempts that ran at the same moment, from the stand-in's start/end lines."""
    marks = sorted((e["at"], 1 if e["event"] == "start" else -1) for e in events)
    running = peak = 0
    for _, step in marks:
        running += step
        peak = max(peak, running)
    return peak


def test_cap_is_held_with_real_runners(make_panel):  # the stagger's pacing: test_launch_pacing.py
    panel = make_panel([f"t{i}" for i in range(6)], max_active_tasks=2, launch_stagger_seconds=0.1,
                       sleep_sec=(0.5, 0.9))
    states = panel.run()
    assert states == {f"t{i}": "finished" for i in range(6)}
    assert overlap_peak(panel.events()) == 2
    assert sum(e["event"] == "launch" for e in panel.queue_events()) == 6
    run_dir = panel.run_dir
    assert all((run_dir / "tasks" / f"t{i}" / "result.json").exists() for i in range(6))
    assert all((run_dir / "logs" / f"t{i}.log").exists() for i in range(6))
    assert "All tasks final" in (run_dir / "QUEUE_STATUS.md").read_text()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["run_id"] == panel.config.run_id and "error" in manifest["starts"][0]["gateway_health"]
    assert orjson.loads((run_dir / "config.json").read_bytes())["run_id"] == panel.config.run_id


def test_infrastructure_failures_are_set_aside_and_rerun(make_panel):
    guest_fail = {"status": "error", "score": None, "failure_classification": "guest"}
    panel = make_panel(["flaky", "agentfail", "broken"], max_active_tasks=3, outcomes={
        "flaky": [guest_fail, {"status": "completed", "score": 1.0}],
        "agentfail": [{"status": "error", "score": None, "failure_classification": "agent"}],
        "broken": [{"status": "error", "score": None, "failure_classification": "setup"}],
    })
    assert panel.run() == {"flaky": "finished", "agentfail": "finished", "broken": "exhausted"}
    retries = panel.run_dir / "retries"
    assert sorted(p.name for p in retries.iterdir()) == ["broken-1", "broken-2", "broken-3", "flaky-1"]
    note = orjson.loads((retries / "flaky-1" / "retry.json").read_bytes())
    assert note["failure_classification"] == "guest" and note["attempt"] == 1
    assert (retries / "flaky-1" / "result.json").exists() and (retries / "flaky-1" / "runner.log").exists()
    assert "broken-3: setup" in (panel.run_dir / "QUEUE_STATUS.md").read_text()
    final = orjson.loads((panel.run_dir / "tasks" / "broken" / "result.json").read_bytes())
    assert final["attempt"] == RETRIES.attempts and final["failure_classification"] == "setup"
    started = [(e["task_id"], e["attempt"]) for e in panel.events() if e["event"] == "start"]
    assert sorted(started) == [("agentfail", 1), ("broken", 1), ("broken", 2), ("broken", 3), ("broken", 4),
                               ("flaky", 1), ("flaky", 2)]
    summary = summarize(panel.run_dir)  # retries are never scored; the exhausted task and the agent error withheld
    assert (summary["valid"], summary["withheld"], summary["lower_bound"]) == (1, 2, pytest.approx(1 / 3))
    assert summary["withheld_tasks"] == [{"task_id": "agentfail", "reason": "error"},
                                         {"task_id": "broken", "reason": "error"}]
    assert summary["attempts"] == 7 and summary["retried_tasks"] == 2


def test_a_configuration_failure_stops_launches_and_says_why_in_one_line(make_panel):
    """a configuration or prerequisite failure is not retried; the queue launches nothing
    more, lets what runs finish, and says why in one line. Started again (the cause fixed), it runs the rest."""
    missing = {"status": "error", "score": None, "failure_classification": "configuration",
               "failure_message": "guest image /images/osworld.qcow2: no such file"}
    panel = make_panel(["first", "second", "third"], max_active_tasks=1, sleep_sec=(0.1, 0.2),
                       outcomes={"first": [missing, {"status": "completed", "score": 1.0}]})
    with pytest.raises(QueueStopped) as stopped:
        panel.run()
    message = str(stopped.value)
    assert message == "launches stopped: task first: guest image /images/osworld.qcow2: no such file"
    assert [e["task_id"] for e in panel.events() if e["event"] == "start"] == ["first"], "nothing more launched"
    note = orjson.loads((panel.run_dir / "retries" / "first-1" / "retry.json").read_bytes())
    assert note["failure_classification"] == "configuration"
    assert message in (panel.run_dir / "QUEUE_STATUS.md").read_text()
    assert panel.run() == {"first": "finished", "second": "finished", "third": "finished"}
    summary = summarize(panel.run_dir)
    assert summary["attempts_by_class"]["configuration"] == {"attempts": 1, "retried": False, "scored": False}
    assert summary["attempts_by_class"]["clean"]["attempts"] == 3


def test_rate_limit_pauses_launches_across_restarts(make_panel):
    limited = {"status": "error", "score": None, "failure_classification": "upstream_rate_limit"}
    panel = make_panel(["limited", "next"], max_active_tasks=1, sleep_sec=(0.1, 0.2),
                       outcomes={"limited": [limited]})
    status = panel.run_dir / "QUEUE_STATUS.md"
    for round_ in range(2):
        status.unlink(missing_ok=True)  # so the paused status seen below is this queue's
        queue = panel.start()
        wait_for(lambda: (panel.run_dir / "retries" / "limited-1").is_dir(), 30, "the rate-limited retry")
        starts = round_ + 1
        wait_for(lambda n=starts: sum(e["event"] == "start" for e in panel.queue_events()) == n, 30,
                 "this queue's start")
        wait_for(lambda: status.exists() and "Launches paused" in status.read_text(), 10,
                 "a paused status")  # written after the poll's launch decision: a launch would precede it
        queue.send_signal(signal.SIGTERM)
        assert queue.wait(timeout=20) == 130, queue.stderr.read().decode()
        launches = [e for e in panel.queue_events() if e["event"] == "launch"]
        assert [e["task_id"] for e in launches] == ["limited"], f"round {round_}: launched during the pause"
    note = orjson.loads((panel.run_dir / "retries" / "limited-1" / "retry.json").read_bytes())
    assert note["pause_launches_sec"] == 300.0


def test_changed_config_refused_but_tunables_accepted(make_panel):
    panel = make_panel(["a", "b"])
    panel.run()
    starts = len(panel.events())
    panel.edit(model="another-model")
    with pytest.raises(QueueRefused, match="model differ"):
        panel.run()
    dry = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(panel.config_path), "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 2 and "config: REFUSED, model differ" in dry.stdout
    panel.edit(model=None, max_active_tasks=5, launch_stagger_seconds=3)
    assert panel.run() == {"a": "finished", "b": "finished"}
    assert len(panel.events()) == starts, "finished tasks must not run again"
    assert orjson.loads((panel.run_dir / "config.json").read_bytes())["max_active_tasks"] == 5


def test_second_queue_on_the_same_run_is_refused(make_panel):
    panel = make_panel(["a"])
    with run_lock(panel.run_dir), pytest.raises(QueueRefused, match="another queue"):
        panel.run()
    queue = panel.start()
    assert queue.wait(timeout=60) == 0


def test_stopped_queue_leaves_attempts_running_and_restart_adopts_them(make_panel):
    panel = make_panel(["a", "b", "c"], max_active_tasks=2, sleep_sec=(2.5, 3.0))
    queue = panel.start()
    leases = [panel.run_dir / "tasks" / name / "attempt.json" for name in ("a", "b")]
    wait_for(lambda: all(p.exists() for p in leases), 30, "two leases")
    queue.send_signal(signal.SIGTERM)
    assert queue.wait(timeout=20) == 130
    pids = [orjson.loads(p.read_bytes())["pid"] for p in leases]
    for pid in pids:
        os.kill(pid, 0)  # raises if the runner died with the queue
    status = (panel.run_dir / "QUEUE_STATUS.md").read_text()
    assert "keep running" in status and "## Active (2 of 2)" in status
    assert f"| a | 1 | {pids[0]} | agent |" in status and f"| b | 1 | {pids[1]} | agent |" in status
    assert panel.run() == {"a": "finished", "b": "finished", "c": "finished"}
    adopted = {e["task_id"] for e in panel.queue_events() if e["event"] == "adopt"}
    assert adopted == {"a", "b"}
    started = [(e["task_id"], e["attempt"]) for e in panel.events() if e["event"] == "start"]
    assert sorted(started) == [("a", 1), ("b", 1), ("c", 1)]
    assert not (panel.run_dir / "retries").exists()


def test_dry_run_prints_gateway_flags_and_writes_nothing(make_panel):
    panel = make_panel(["a", "b"], max_model_calls=37)
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(panel.config_path), "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    token_log = panel.run_dir / "gateway-tokens.jsonl"
    assert f"--out {token_log} --max-requests-per-task 37" in out.stdout
    assert "  a  -  pending  attempt 1" in out.stdout and "--test-desktop none:latest" in out.stdout
    assert not panel.run_dir.exists()


@pytest.mark.parametrize("body, names", [
    ({"tasks": ["a"], "bogus": 1}, "bogus: unknown key"),
    ({"tasks": ["a", "a"]}, "tasks: duplicate task id 'a'"),
    ({"tasks": ["a"], "max_active_tasks": "many"}, 'max_active_tasks: expected a positive integer or "auto"'),
    ({"tasks": ["a"], "max_active_tasks": "auto"}, 'max_active_tasks: "auto" needs auto_max_active_tasks'),
    ({"tasks": ["a"], "max_active_tasks": "auto", "auto_max_active_tasks": 0},
     "auto_max_active_tasks: Input should be greater than 0"),
    ({"tasks": ["a"], "max_active_tasks": 4, "auto_max_active_tasks": 8},
     'auto_max_active_tasks: only with "max_active_tasks": "auto"'),
    ({"tasks": ["a"], "repeats": 0}, "repeats: Input should be greater than or equal to 1"),
    ({"tasks": ["a"], "max_cost_usd": 10}, "max_cost_usd: needs a price for the run's model (prices.gpt-5.5)"),
    ({"tasks": ["a"], "prices": {"gpt-5.5": {"input_usd_per_mtok": -1, "cached_input_usd_per_mtok": 0,
                                             "output_usd_per_mtok": 1}}},
     "prices.gpt-5.5.input_usd_per_mtok: Input should be greater than or equal to 0"),
])
def test_bad_config_is_one_line_exit_2(tmp_path: Path, body: dict, names: str):
    path = tmp_path / "bad.json"
    base = {"benchmark_version": "v1", "agent": "codex", "test_desktop": True}
    path.write_bytes(orjson.dumps({**base, **body}))
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and names in out.stderr and "Traceback" not in out.stderr


def test_attempt_leased_by_another_host_is_refused(make_panel):
    panel = make_panel(["a"])
    attempt = AttemptId(run_id=str(panel.config.run_id), task_id="a", attempt=1)
    lease = lease_for_this_process(attempt, panel.run_dir / "tasks" / "a")
    write_record(panel.run_dir / "tasks" / "a" / "attempt.json", lease.model_copy(update={"host": "elsewhere"}))
    with pytest.raises(QueueRefused, match="leased by host elsewhere"):
        panel.run()
    assert (panel.run_dir / "tasks" / "a" / "attempt.json").exists() and not (panel.run_dir / "retries").exists()
