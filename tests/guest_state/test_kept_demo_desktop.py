"""The demo run's kept final desktop (keep_final_desktop "zeros", its default: the one task the policy leaves
undone) on the test desktop, which keeps the desktop's files: regraded with the task files unchanged it scores as
before without a model call; regraded after its evaluator changed it scores by the new one, and summarize counts
the new score; open_desktop serves it and removes everything on Ctrl-C. The run is a copy of the session's demo
run, so the tests that read the demo see it as it was."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import docker
import orjson
import pytest
import requests

from hcu import REPO_ROOT
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.guest.removal import cleanup
from hcu.osworld.guest_state.kept import read
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import read_record, sha256_of_file
from tests.demo_panel import DemoRun

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld, pytest.mark.timeout(900)]

UNDONE = "a4d98375-215b-4a4d-aee9-3d4370fccc41"
"""The auto-lock task: the demo's policy does nothing, it scores 0, its desktop is kept."""
SOLVED = "e0df059f-28a6-4169-924f-b9623e7184cc"


def copy_of(demo: DemoRun, folder: Path, tasks_dir: Path | None = None) -> Path:
    """The demo run copied into `folder`, its config pointing at the copy (and at `tasks_dir`, when given)."""
    run_dir = folder / demo.run_dir.name
    shutil.copytree(demo.run_dir, run_dir)
    config = orjson.loads((run_dir / "config.json").read_bytes())
    config["results_dir"] = str(folder)
    if tasks_dir is not None:
        config["tasks_dir"] = str(tasks_dir)
    (run_dir / "config.json").write_bytes(orjson.dumps(config))
    return run_dir


def regrade(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.regrade", str(run_dir), *args], capture_output=True,
                          text=True, timeout=600, cwd=REPO_ROOT)


def test_only_the_attempt_that_did_not_score_kept_its_desktop_and_says_what_it_holds(demo_run: DemoRun) -> None:
    tasks = demo_run.run_dir / "tasks"
    kept = read_record(tasks / UNDONE / "meta.json", AttemptMeta).final_desktop
    assert kept is not None and kept.kept and kept.holds == ["files"], kept
    assert kept.lacks == ["memory", "running applications", "open windows"], "the record says what is not kept"
    assert kept.bytes is not None and kept.bytes > 0 and kept.save_sec is not None
    desktop = read(tasks / UNDONE)
    assert desktop is not None and desktop.kind == "test-desktop" and desktop.saved.image
    assert desktop.termination_reason == "completed" and desktop.task_sha256
    solved = read_record(tasks / SOLVED / "meta.json", AttemptMeta).final_desktop
    assert solved is not None and not solved.kept and solved.reason.startswith("scored 1 "), solved
    assert not (tasks / SOLVED / "final-desktop").exists(), "a desktop not kept leaves nothing behind"
    started = read_record(tasks / UNDONE / "meta.json", AttemptMeta).guest.start
    assert (started.asked, started.got) == ("snapshot", "cold") and "no machine state" in started.reason


def test_a_regrade_with_unchanged_task_files_scores_the_same_without_a_model_call(demo_run: DemoRun,
                                                                                   tmp_path: Path) -> None:
    run_dir = copy_of(demo_run, tmp_path)
    token_log = run_dir / "gateway-tokens.jsonl"
    before = sha256_of_file(token_log)
    done = regrade(run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_record(run_dir / "tasks" / UNDONE / "regrade.json", Regrade)
    assert (record.status, record.score_before, record.score_after) == ("completed", 0.0, 0.0), record
    assert record.evaluator_sha256_now == record.evaluator_sha256_then
    assert record.task_sha256_now == record.task_sha256_then
    assert sha256_of_file(token_log) == before, "no model call: the token log did not grow"
    assert [p.name for p in record.phases] == ["load", "boot", "open osworld", "evaluate", "cleanup"]
    assert "1 kept final desktops regraded" in done.stdout and "0 scores changed" in done.stdout
    assert not (run_dir / "tasks" / SOLVED / "regrade.json").exists(), "only kept desktops are regraded"


def test_a_regrade_after_the_evaluator_changed_gives_the_new_score(demo_run: DemoRun, tmp_path: Path) -> None:
    tasks_dir = tmp_path / "tasks-now"
    shutil.copytree(REPO_ROOT / "configs" / "demo-tasks", tasks_dir)
    task_file = tasks_dir / "examples" / "os" / f"{UNDONE}.json"
    task = orjson.loads(task_file.read_bytes())
    task["evaluator"]["expected"]["rules"]["expected"] = "false\n"  # the check as a fixed evaluator might read
    task_file.write_bytes(orjson.dumps(task))
    run_dir = copy_of(demo_run, tmp_path / "runs", tasks_dir)
    done = regrade(run_dir, "--tasks", UNDONE)
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_record(run_dir / "tasks" / UNDONE / "regrade.json", Regrade)
    assert (record.status, record.score_before, record.score_after) == ("completed", 0.0, 1.0), record
    assert record.evaluator_sha256_now != record.evaluator_sha256_then
    table = (run_dir / "regrade" / "summary.md").read_text()
    assert f"| {UNDONE} | 1 | 0 | 1 | completed (changed) | yes | yes |" in table, table
    summary = summarize(run_dir)
    assert summary["score"] == 1.0 and summary["regraded"]["changed"] == 1, "the regraded score counts"
    assert orjson.loads((run_dir / "tasks" / UNDONE / "result.json").read_bytes())["score"] == 0.0, (
        "the first grading stays")


def test_open_desktop_serves_the_kept_desktop_until_ctrl_c_then_removes_it(demo_run: DemoRun,
                                                                           tmp_path: Path) -> None:
    run_dir = copy_of(demo_run, tmp_path)
    run_id = orjson.loads((run_dir / "config.json").read_bytes())["run_id"]
    opened = subprocess.Popen([sys.executable, "-m", "hcu.osworld.open_desktop", str(run_dir), UNDONE],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT)
    try:
        lines = [opened.stdout.readline() for _ in range(4)]
        screen = next(line.split()[1] for line in lines if line.strip().startswith("screen:"))
        api = next(line.split()[-1] for line in lines if line.strip().startswith("in-guest API:"))
        assert requests.get(f"{screen}vnc.html", timeout=30).status_code == 200, "noVNC, on the bridge"
        said = requests.post(f"{api}/execute", json={"command": "gsettings get org.gnome.desktop.screensaver "
                             "lock-enabled", "shell": True}, timeout=60).json()
        assert said["output"] == "false\n", "the kept files: the task's setup left the lock off"
        opened.send_signal(signal.SIGINT)
        assert opened.wait(timeout=120) == 0, opened.stdout.read()
    finally:
        if opened.poll() is None:
            opened.kill()
            cleanup(run_id=f"{run_id}.open")  # what the killed command could not remove
    with contextlib.closing(docker.from_env(timeout=60)) as client:
        left = client.containers.list(all=True, filters={"label": f"hcu.run_id={run_id}.open"})
    assert left == [], "Ctrl-C removed the guest"
    assert not (run_dir / "regrade" / f"open-{UNDONE}").exists()
