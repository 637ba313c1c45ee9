"""The viewer's data layer: rows from result.json (hcu's scoring rules, repeats, retries, runs in progress, old
and torn records), the cache, one attempt read in full, and the pairing of two runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from hcu.osworld.view.attempt_data import read_attempt
from hcu.osworld.view.compare import compare_runs
from hcu.osworld.view.data import RunData, RunDirError, split_key
from hcu.record_io import write_json
from tests.view.conftest import REPEATS, TASKS, task_id
from tests.view.sample_run import Attempt, SampleRun, build_run


def rows_by_key(run_dir: Path) -> dict:
    return {row.key: row for row in RunData(run_dir).index().rows}


def test_one_row_per_task_and_repeat_in_config_order(sample: SampleRun) -> None:
    rows = RunData(sample.run_dir).index().rows
    assert [(row.task_id, row.repeat) for row in rows] == [(task_id(i), r) for i in range(TASKS)
                                                           for r in range(1, REPEATS + 1)]
    assert {row.key for row in rows if row.repeat == 2} == {f"{task_id(i)}.r2" for i in range(TASKS)}


def test_rows_apply_the_scoring_rules(sample: SampleRun) -> None:
    rows = rows_by_key(sample.run_dir)
    by_outcome = {a.outcome: rows[a.key] for a in sample.attempts}
    assert (by_outcome["pass"].score, by_outcome["partial"].score, by_outcome["fail"].score) == (1.0, 0.5, 0.0)
    timeout = by_outcome["timeout"]
    assert (timeout.score, timeout.evaluator_score, timeout.termination) == (0.0, 1.0, "timeout")
    failed = by_outcome["evaluator_error"]
    assert (failed.score, failed.status, failed.failure_class) == (None, "evaluator_error", "evaluator")
    assert by_outcome["read_nothing"].getters_read_nothing == "get_vm_file"
    running = by_outcome["no_result"]
    assert (running.status, running.phase, running.score) == ("no result", "agent", None)


def test_retries_and_cost_are_read(sample: SampleRun) -> None:
    rows = rows_by_key(sample.run_dir)
    retried = [a.key for a in sample.attempts if a.outcome == "retried_pass"]
    assert retried and all(rows[key].retries == 1 for key in retried)
    assert all(row.retries == 0 for key, row in rows.items() if key not in retried)
    costs = {row.cost_usd for row in rows.values() if row.status == "completed"}
    assert None in costs and any(isinstance(c, float) and c > 0 for c in costs), "known and unknown costs both"


def test_a_task_id_with_a_repeat_like_suffix_is_not_split() -> None:
    known = {"abc", "x.r2"}
    assert split_key("abc.r3", known) == ("abc", 3)
    assert split_key("x.r2", known) == ("x.r2", 1), "a config task id of its own"
    assert split_key("abc.r1", known) == ("abc.r1", 1), "repeat 1 never carries a suffix"
    assert split_key("zzz.r2", known) == ("zzz.r2", 1), "no config task zzz"


def test_rows_follow_result_files_as_they_change(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "live", [Attempt("t-1", "fail"), Attempt("t-2", "no_result")])
    data = RunData(sample.run_dir)
    assert [row.score for row in data.index().rows] == [0.0, None]
    path = sample.run_dir / "tasks" / "t-1" / "result.json"
    body = orjson.loads(path.read_bytes())
    body.update(score=1.0, evaluator_score=1.0, failure_message="now longer, so the file's size changes")
    write_json(path, body)
    shutil.copy(path, sample.run_dir / "tasks" / "t-2" / "result.json")
    assert [row.score for row in data.index().rows] == [1.0, 1.0]


def test_the_summary_is_read_once_until_it_changes(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "summed", [Attempt("t-1", "fail")])
    data = RunData(sample.run_dir)
    first = data.summary_file()
    assert data.summary_file() is first, "a page asks more than once; the file is parsed once"
    path = sample.run_dir / "summary" / "summary.json"
    write_json(path, orjson.loads(path.read_bytes()) | {"score": 1.0, "run_id": "summed-again"})
    assert data.summary() is not None and (data.summary().score, data.summary().run_id) == (1.0, "summed-again")
    path.write_text("{torn")
    assert data.summary() is None and data.summary_file().problem.startswith("summary/summary.json: not JSON")
    path.unlink()
    assert data.summary_file().summary is None and data.summary_file().problem is None


def test_old_torn_and_foreign_records_still_open(tmp_path: Path) -> None:
    sample = build_run(tmp_path, "old", [Attempt("t-1", "pass"), Attempt("t-2", "pass"), Attempt("t-3", "pass"),
                                         Attempt("t-4", "no_result")])
    tasks = sample.run_dir / "tasks"
    write_json(tasks / "t-1" / "result.json", {"status": "completed", "score": 1.0})  # the reference's fields only
    (tasks / "t-2" / "result.json").write_bytes(b'{"status": "comp')
    write_json(tasks / "t-3" / "trajectory.json", {"steps": "not a list"})
    write_json(tasks / "t-3" / "meta.json", ["not", "an", "object"])
    shutil.rmtree(tasks / "t-4")
    (tasks / "stray").mkdir()
    (sample.run_dir / "summary" / "summary.json").unlink()
    data = RunData(sample.run_dir)
    rows = {row.key: row for row in data.index().rows}
    assert (rows["t-1"].score, rows["t-1"].repeat, rows["t-1"].cost_usd) == (1.0, 1, None)
    assert rows["t-2"].status == "unreadable"
    assert rows["t-4"].status == "not started"
    assert data.index().extra_folders == ["stray"] and data.summary() is None
    detail = read_attempt(data, "tasks", "t-3")
    assert detail is not None and detail.trajectory is None and detail.meta.record is None
    assert detail.meta.problem == "tasks/t-3/meta.json: expected a JSON object"
    assert "does not read as ATIF" in (detail.trajectory_problem or "")


def test_an_attempt_is_read_in_full(sample: SampleRun) -> None:
    data = RunData(sample.run_dir)
    attempt = next(a for a in sample.attempts if a.outcome == "retried_pass")
    detail = read_attempt(data, "tasks", attempt.key)
    assert detail is not None and detail.trajectory is not None
    assert len(detail.trajectory.steps) == attempt.steps + 1 and detail.instruction.startswith("Do task")
    assert [label for label, _ in detail.final_screenshots] == ["before evaluation", "after evaluation"]
    assert [log.label for log in detail.logs] == ["runner log", "agent turn 1 stderr"]
    assert [row.key for row, _ in detail.retried] == [f"{attempt.key}-1"]
    note = detail.retried[0][1]
    assert note is not None and note.failure_classification == "guest"
    assert detail.meta.record is not None and detail.lease.record is not None
    assert detail.lease.shown() == orjson.loads((sample.run_dir / "tasks" / attempt.key / "attempt.json").read_bytes())
    assert any(entry.path.endswith("/steps") and entry.files_inside == attempt.steps for entry in detail.files)
    retry = read_attempt(data, "retries", f"{attempt.key}-1")
    assert retry is not None and retry.row.failure_class == "guest" and retry.row.task_id == attempt.task_id
    assert [log.path for log in retry.logs][0] == f"retries/{attempt.key}-1/runner.log"


@pytest.mark.parametrize("name", ["..", "../tasks", "a/b", "", ".", "x\\y"])
def test_an_attempt_name_that_is_not_a_folder_name_reads_nothing(sample: SampleRun, name: str) -> None:
    assert read_attempt(RunData(sample.run_dir), "tasks", name) is None


def test_a_symlinked_attempt_folder_out_of_the_run_reads_nothing(sample: SampleRun, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    shutil.copytree(sample.run_dir / "tasks" / sample.attempts[0].key, outside)
    link = sample.run_dir / "tasks" / "linked-out"
    os.symlink(outside, link)
    try:
        assert read_attempt(RunData(sample.run_dir), "tasks", "linked-out") is None
    finally:
        link.unlink()


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a run directory"):
        RunData(tmp_path)
    with pytest.raises(RunDirError, match="not a directory"):
        RunData(tmp_path / "absent")


def test_compare_puts_disagreeing_tasks_first(sample: SampleRun, other_sample: SampleRun) -> None:
    comparison = compare_runs(RunData(sample.run_dir).index(), RunData(other_sample.run_dir).index())
    verdicts = [pair.verdict for pair in comparison.pairs]
    assert verdicts == sorted(verdicts, key=["disagree", "not comparable", "only here", "only there",
                                             "agree"].index)
    disagreeing = [pair for pair in comparison.pairs if pair.verdict == "disagree"]
    assert disagreeing and all(pair.difference != 0 for pair in disagreeing)
    sizes = [abs(pair.difference) for pair in disagreeing]
    assert sizes == sorted(sizes, reverse=True)
    graded = [pair for pair in comparison.pairs if pair.difference is not None]
    assert comparison.paired.tasks == len(graded)
    assert comparison.paired.mean == pytest.approx(sum(p.difference for p in graded) / len(graded))
    assert comparison.discordant == comparison.better(1) + comparison.better(-1) == len(disagreeing)
