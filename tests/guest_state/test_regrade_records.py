"""What a regrade leaves is read the way the issue asks, without a guest: summarize counts the regraded score and
keeps the first grading beside it; regrade and open_desktop refuse, in one line and before starting anything, a
run directory, a task or a selection without a kept desktop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import write_record
from tests.summary.conftest import make_repeat_run, ok


def regrade_record(task_id: str, before: float | None, after: float | None, status: str = "completed") -> Regrade:
    return Regrade(attempt_id=f"r/{task_id}/1", task_id=task_id, status=status, score_before=before,
                   score_after=after, evaluator_score=after, task_sha256_then="a" * 64, task_sha256_now="a" * 64,
                   evaluator_sha256_then="b" * 64, evaluator_sha256_now="c" * 64, regraded_at=0.0, duration_sec=1.0)


def test_summarize_counts_regraded_scores_and_keeps_the_first_grading(tmp_path: Path) -> None:
    run_dir = make_repeat_run(tmp_path, "regraded", {"t1": [ok(0.0)], "t2": [ok(1.0)], "t3": [
        {"status": "evaluator_error", "failure_classification": "evaluator"}], "t4": [ok(0.0)]})
    write_record(run_dir / "tasks" / "t1" / "regrade.json", regrade_record("t1", 0.0, 1.0))
    write_record(run_dir / "tasks" / "t3" / "regrade.json", regrade_record("t3", None, 0.0))
    write_record(run_dir / "tasks" / "t4" / "regrade.json", regrade_record("t4", 0.0, None, status="error"))
    summary = summarize(run_dir)
    assert summary["score"] == pytest.approx(0.5), "t1 now 1, t2 1, t3 now 0, t4 0: the regraded scores count"
    assert summary["withheld"] == 0, "t3's evaluator error was regraded into a score"
    assert summary["regraded"] == {
        "attempts": [{"task_id": "t1", "first_score": 0.0, "score": 1.0},
                     {"task_id": "t3", "first_score": None, "score": 0.0}],
        "changed": 2, "not_regraded": 1}
    first = orjson.loads((run_dir / "tasks" / "t1" / "result.json").read_bytes())
    assert first["score"] == 0.0, "the first grading stays in result.json"
    text = (run_dir / "summary" / "summary.md").read_text()
    assert "| Regraded (kept final desktops scored again" in text
    assert "2 repeats, 2 changed: t1 0 -> 1; t3 withheld -> 0; 1 could not be regraded" in text


def test_a_run_without_regrades_has_no_regraded_figure(tmp_path: Path) -> None:
    summary = summarize(make_repeat_run(tmp_path, "plain", {"t1": [ok(1.0)]}))
    assert summary["regraded"] is None
    assert "Regraded" not in (tmp_path / "plain" / "summary" / "summary.md").read_text()


def command(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"hcu.osworld.{module}", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)


@pytest.mark.parametrize("module, extra", [("regrade", []), ("open_desktop", ["t1"])])
def test_refusals_are_one_line_and_start_nothing(tmp_path: Path, module: str, extra: list[str]) -> None:
    run_dir = make_repeat_run(tmp_path, "nothing-kept", {"t1": [ok(0.0)], "t2": [ok(1.0)]})
    cases = [
        ([str(tmp_path / "absent"), *extra], "no config.json (not a run directory)"),
        ([str(run_dir), *extra], "no kept final desktop for t1" if extra else "no kept final desktop for its tasks"),
    ]
    unknown = ["nope"] if module == "open_desktop" else ["--tasks", "nope"]
    cases.append(([str(run_dir), *unknown], "nope is not a task of run nothing-kept"))
    for args, said in cases:
        done = command(module, *args)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr
        assert done.stdout == ""
    assert not (run_dir / "regrade").exists(), "nothing started"
