"""A canary cannot pass a broken setup (setup_canary on the test desktop, with OSWorld's own SetupController):
a guest answer that is not a success fails its step even where OSWorld only logs it, with the guest's message
(password masked) in the one-line error; an application that never shows up fails the step that started it; a
getter that read nothing fails the canary although the evaluator returned a score."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from tests.official_tasks import OFFICIAL_TASKS
from tests.session import TEST_DESKTOP_IMAGE
from tests.setup_eval.conftest import GUEST_PASSWORD, write_task
from tests.setup_eval.test_canary_docker import assert_guest_removed, canary_run_id

pytestmark = [pytest.mark.docker, pytest.mark.osworld]


def canary(tmp_path: Path, task_id: str, tasks_dir: Path, *extra: str) -> tuple[int, dict, str]:
    result_dir = tmp_path / "r"
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--task-id", task_id, "--tasks-dir", str(tasks_dir),
         "--test-desktop", TEST_DESKTOP_IMAGE, "--result-dir", str(result_dir), "--run-id", canary_run_id(result_dir),
         "--client-password", GUEST_PASSWORD,
         "--run-evaluator", "--offline-assets", "--asset-cache", str(tmp_path / "assets"), *extra],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    raw = (result_dir / "report.json").read_text()
    assert GUEST_PASSWORD not in raw and GUEST_PASSWORD not in done.stdout + done.stderr
    return done.returncode, orjson.loads(raw), done.stderr


def synthetic(tmp_path: Path, task_id: str, config: list[dict], evaluator: dict | None = None) -> tuple[str, Path]:
    evaluator = evaluator or {"func": "exact_match", "result": {"type": "vm_command_line", "command": ["true"]},
                              "expected": {"type": "rule", "rules": {"expected": "never"}}}
    write_task(tmp_path / "tasks", "os", {"id": task_id, "instruction": "a synthetic task of the hcu tests",
                                          "config": config, "evaluator": evaluator})
    return task_id, tmp_path / "tasks"


def test_a_launch_of_a_missing_application_fails_setup_naming_it(tmp_path: Path) -> None:
    """The guest refuses the launch; an application that is not installed fails every attempt the same way,
    so it is a `configuration` failure (never retried, never scored), named in one line."""
    task_id = "276cc624-87ea-4f08-ab93-f770e3790175"  # vs_code: the test desktop has no `code`
    code, report, _ = canary(tmp_path, task_id, OFFICIAL_TASKS)
    assert (code, report["status"], report["failure_classification"]) == (1, "failed", "configuration")
    failed = report["setup_steps"][-1]
    assert (failed["type"], failed["ok"]) == ("launch", False)
    assert failed["error"] == ("missing application: VS Code (`code`) is not installed in the guest; "
                               "the guest answered POST /setup/launch -> HTTP 500: "
                               "[Errno 2] No such file or directory: 'code'")
    assert report["evaluator"] is None and "\n" not in report["error"]
    assert_guest_removed(tmp_path / "r")


def test_a_command_the_guest_cannot_run_fails_its_step_with_the_password_masked(tmp_path: Path) -> None:
    """OSWorld's `execute` step only logs the guest's 500; hcu fails the step. The command carries the
    password (a task's `{CLIENT_PASSWORD}` placeholder), and so does the guest's message: both masked."""
    task_id, tasks = synthetic(tmp_path, "hcu-strict-execute", [
        {"type": "execute", "parameters": {"command": ["echo", "ready"]}},
        {"type": "execute", "parameters": {"command": ["/opt/{CLIENT_PASSWORD}/tool", "--run"]}}])
    code, report, stderr = canary(tmp_path, task_id, tasks)
    assert (code, report["failure_classification"]) == (1, "setup"), stderr[-2000:]
    ok, failed = report["setup_steps"]
    assert ok["ok"] and ok["guest_answers"] == [{"method": "POST", "path": "/setup/execute", "status": 200, "ok": True,
                                                 "message": None, "returncode": 0, "file": None}]
    assert failed["error"] == ("the guest answered POST /setup/execute -> HTTP 500: "
                               "[Errno 2] No such file or directory: '/opt/***/tool'")
    assert failed["parameters"] == {"command": ["/opt/{CLIENT_PASSWORD}/tool", "--run"]}


def test_an_application_that_never_shows_a_window_fails_the_step_that_started_it(tmp_path: Path) -> None:
    task_id, tasks = synthetic(tmp_path, "hcu-strict-no-window",
                               [{"type": "launch", "parameters": {"command": ["gimp", "--version"]}}])
    code, report, stderr = canary(tmp_path, task_id, tasks, "--app-start-timeout-seconds", "5")
    assert (code, report["failure_classification"]) == (1, "setup"), stderr[-2000:]
    failed = report["setup_steps"][-1]
    # the guest answered "launched" (GIMP printed its version and exited)
    assert [(a["path"], a["ok"]) for a in failed["guest_answers"]] == [("/setup/launch", True)] and not failed["ok"]
    assert failed["error"].startswith("a window of GIMP: not there 5 s after the step (windows: ")


def test_an_open_whose_file_shows_no_window_ends_at_the_application_deadline_naming_the_file(tmp_path: Path) -> None:
    """The guest's open_file waits minutes for a window naming the file (the official one 30); hcu's own bound,
    the application deadline, ends the step and names the file, well before the guest gives up."""
    task_id, tasks = synthetic(tmp_path, "hcu-strict-open-no-window", [
        {"type": "execute", "parameters": {  # bytes of no type any application opens
            "command": "head -c 4096 /dev/urandom > /home/user/nothing.hcu-no-handler", "shell": True}},
        {"type": "open", "parameters": {"path": "/home/user/nothing.hcu-no-handler"}}])
    code, report, stderr = canary(tmp_path, task_id, tasks, "--app-start-timeout-seconds", "8")
    assert (code, report["failure_classification"]) == (1, "setup"), stderr[-2000:]
    failed = report["setup_steps"][-1]
    assert (failed["type"], failed["ok"]) == ("open", False)
    assert failed["error"] == ("no window of /home/user/nothing.hcu-no-handler appeared within 8 s "
                               "(the guest's open_file still waits)"), "hcu's bound, not the guest's own wait"
    assert "setup step 1 (open) failed" in report["error"] and "\n" not in report["error"]


def test_a_getter_that_reads_nothing_fails_the_canary_though_it_was_evaluated(tmp_path: Path) -> None:
    task_id, tasks = synthetic(tmp_path, "hcu-strict-empty-getter",
                               [{"type": "execute", "parameters": {"command": ["true"]}}], {
        "func": "exact_match", "result": {"type": "vm_file", "path": "/home/user/absent.txt", "dest": "absent.txt"},
        "expected": {"type": "rule", "rules": {"expected": "x"}}})
    code, report, stderr = canary(tmp_path, task_id, tasks)
    assert (code, report["status"], report["failure_classification"]) == (1, "failed", "evaluator"), stderr[-2000:]
    assert report["evaluator"]["score"] == 0.0  # OSWorld scored it: "evaluated", but on nothing
    (empty,) = report["evaluator"]["getters_read_nothing"]
    assert empty["getter"] == "vm_file"
    assert empty["reason"].startswith("returned None; guest: POST /file (/home/user/absent.txt) -> HTTP 404: "
                                      "File not found")
    assert report["error"].startswith("the evaluator could not read the state: vm_file: returned None")


def test_the_issues_chrome_canary_now_passes_for_the_right_reasons(tmp_path: Path) -> None:
    """chrome/030eeff7: Chrome and its debugging port are really there, and the getter read its Preferences."""
    code, report, stderr = canary(tmp_path, "030eeff7-b492-4218-b312-701ec99ee0cc", OFFICIAL_TASKS)
    assert (code, report["status"]) == (0, "passed"), report.get("error") or stderr[-2000:]
    launch_chrome, bridge = (step["checks"] for step in report["setup_steps"])
    assert launch_chrome[0] == "a window of Google Chrome" and launch_chrome[1].startswith("Chrome's profile written")
    assert len(bridge) == 1 and bridge[0].startswith("Chrome's CDP answering on the leased port")
    assert report["evaluator"]["score"] == 0.0 and report["evaluator"]["getters_read_nothing"] == []
    assert report["hcu"] == str(REPO_ROOT / "hcu")
