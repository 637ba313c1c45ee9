"""The canary sweep command on the test desktop with stand-in assets, one task per domain (the CI run of the
sweep; the whole index is the benchmark bench/bench_canary_sweep.py). The tasks chosen in the seven application
domains are those tests/run_task/test_domains.py solves: here their untouched state scores 0, the do-nothing
baseline of those 1.0s (setup, postconfig and OSWorld's evaluator, no agent)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.canary.attempt import CanaryReport
from hcu.osworld.canary.sweep import report_path
from hcu.record_io import read_record, write_record
from tests.official_tasks import OFFICIAL_TASKS
from tests.run_task.test_domains import DOMAIN_TASKS
from tests.session import TEST_DESKTOP_IMAGE, unique_run_id

pytestmark = [pytest.mark.docker, pytest.mark.osworld]

OTHER_DOMAINS = {
    "os": "e0df059f-28a6-4169-924f-b9623e7184cc",  # rename a folder: the test desktop's terminal and files
    "multi_apps": "2c9fc0de-3ee7-45e1-a5df-c86206ad78b5",  # an archive unpacked, a check on what it holds
    "vs_code": "276cc624-87ea-4f08-ab93-f770e3790175",  # no VS Code on the test desktop: a configuration failure
}
SWEEP_TIMEOUT = 1500


def sweep(out: Path, tasks: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hcu.osworld.canary_sweep", "--out", str(out), "--tasks-dir", str(OFFICIAL_TASKS),
         "--task-ids", ",".join(tasks), "--test-desktop", TEST_DESKTOP_IMAGE, "--asset-stand-ins",
         "--asset-cache", str(out.parent / "stand-ins"), "--max-parallel", "3", "--run-id", unique_run_id("sweep")],
        capture_output=True, text=True, timeout=SWEEP_TIMEOUT, cwd=REPO_ROOT)


@pytest.mark.timeout(2 * SWEEP_TIMEOUT)
def test_one_task_per_domain_through_the_sweep_command_then_a_resume(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    tasks = {**DOMAIN_TASKS, **OTHER_DOMAINS}
    done = sweep(out, list(tasks.values()))
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"10 tasks, \d+ evaluated, \d+ passed; this invocation ran 10 in [\d.]+ min, the whole sweep "
                     r"[\d.]+ min wall; .*sweep.md \(STAND-IN ASSETS\)", done.stdout), done.stdout
    report = orjson.loads((out / "sweep.json").read_bytes())
    rows = {row["domain"]: row for row in report["tasks"]}
    assert sorted(rows) == sorted(tasks) and report["stand_ins"]
    for domain in DOMAIN_TASKS:  # the untouched state of each task the scripted model solves
        row = rows[domain]
        assert (row["status"], row["evaluated"], row["score"], row["getters_read_nothing"]) == (
            "passed", True, 0.0, []), row
    assert (rows["os"]["status"], rows["os"]["score"]) == ("passed", 0.0)
    assert rows["multi_apps"]["evaluated"], rows["multi_apps"]
    code = rows["vs_code"]
    assert (code["evaluated"], code["failure_classification"]) == (False, "configuration")
    assert "missing application: VS Code (`code`)" in code["error"]
    assert report["total"]["tasks"] == 10 and report["total"]["nonzero_untouched_feasible"] == []
    for page in (out / "sweep.md", out / "tasks" / "vlc" / "sweep.md"):
        assert "STAND-IN ASSETS" in page.read_text()

    # resume: only what has no final report runs again
    vlc = read_record(report_path(out, _task(tasks, "vlc")), CanaryReport)
    write_record(report_path(out, _task(tasks, "vlc")), vlc.model_copy(update={
        "status": "failed", "failure_classification": "interrupted", "error": "sweep stopped"}))
    kept = report_path(out, _task(tasks, "gimp")).stat().st_mtime_ns
    again = sweep(out, list(tasks.values()))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "this invocation ran 1 in" in again.stdout, again.stdout
    assert report_path(out, _task(tasks, "gimp")).stat().st_mtime_ns == kept
    resumed = orjson.loads((out / "sweep.json").read_bytes())
    assert len(resumed["invocations"]) == 2
    assert next(r for r in resumed["tasks"] if r["domain"] == "vlc")["status"] == "passed"


def _task(tasks: dict[str, str], domain: str):
    from hcu.osworld.osworld_bridge.tasks import load_task

    return load_task("v1", tasks[domain], domain, OFFICIAL_TASKS)
