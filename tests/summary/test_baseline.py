"""The do-nothing baseline: a run and a canary sweep of its tasks (sweep.json written by the sweep's own report
writer) with known figures; the tasks the evaluator passes untouched are marked in tasks.csv, summary.md and
summary.json, the score without them stands beside the score with the same interval method, tasks the sweep did
not evaluate are unknown (never 0), and a bad `--baseline` or `baseline` key is one line, exit 2."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.records.sweep_file import SweepTask
from hcu.osworld.run_config import TUNABLE_KEYS, ConfigError, parse_config
from hcu.osworld.summary.baseline import untouched_score
from hcu.osworld.summary.model import parse_summary
from hcu.osworld.summary.run_summary import SummaryError, summarize
from hcu.osworld.summary.stats import wilson
from tests.summary.baseline_run import NOT_SWEPT, make_run, make_sweep


def csv_rows(run_dir: Path) -> dict[str, dict[str, str]]:
    with (run_dir / "summary" / "tasks.csv").open() as f:
        return {row["task_id"]: row for row in csv.DictReader(f)}


def test_the_baseline_marks_tasks_and_scores_without_them(tmp_path: Path) -> None:
    sweep, ids = make_sweep(tmp_path)
    run_dir = make_run(tmp_path, ids)
    written = summarize(run_dir, baseline_dir=sweep)
    summary, _ = parse_summary(written)
    b = summary.baseline
    assert b is not None and (b.sweep_run_id, b.guest, b.stand_ins) == ("sweep-base", "test desktop", False)
    assert [(t.task_id, t.score) for t in b.passes_untouched] == [(ids[1], 1.0), (ids[5], 0.5)]
    assert b.fails_untouched == 2, "0 untouched, and 0 with a getter that read nothing (OSWorld's score stands)"
    unknown = {t.task_id: t.why for t in b.unknown}
    assert unknown == {ids[3]: "not evaluated untouched: failed (setup): setup step 2 (download) failed",
                       ids[4]: "the sweep has not run it yet", NOT_SWEPT: "not in the sweep"}
    assert all(t.score is None for t in b.unknown), "unknown is never assumed 0"
    assert summary.score == pytest.approx(5 / 7)
    assert summary.ci95.model_dump() == wilson(5, 7).model_dump() | {"of": "score"}
    without = b.without_untouched_passes
    assert without is not None and (without.tasks, without.score) == (5, pytest.approx(3 / 5))
    assert without.ci95 is not None and without.ci95.model_dump() == wilson(3, 5).model_dump() | {"of": "score"}
    rows = csv_rows(run_dir)
    assert {task_id: (row["untouched"], row["untouched_score"]) for task_id, row in rows.items()} == {
        ids[0]: ("fails", "0.0"), ids[1]: ("passes", "1.0"), ids[2]: ("fails", "0.0"), ids[3]: ("unknown", ""),
        ids[4]: ("unknown", ""), ids[5]: ("passes", "0.5"), NOT_SWEPT: ("unknown", "")}
    md = (run_dir / "summary" / "summary.md").read_text()
    assert ("| Score without the 2 tasks passing untouched (do-nothing baseline; 3 tasks of unknown untouched score "
            "stay in) | **60.0%**; 95% 23.1% to 88.2% (wilson) |") in md
    assert "## Do-nothing baseline" in md and f"- {ids[5]} (os): untouched score 0.5" in md
    assert f"- {NOT_SWEPT} (chrome): not in the sweep" in md


def test_with_repeats_both_intervals_are_the_cluster_bootstrap(tmp_path: Path) -> None:
    sweep, ids = make_sweep(tmp_path)
    summary, _ = parse_summary(summarize(make_run(tmp_path, ids, repeats=2), baseline_dir=sweep))
    without = summary.baseline.without_untouched_passes
    assert summary.ci95.method == without.ci95.method == "cluster bootstrap"
    assert without.score == pytest.approx(3 / 5) and without.ci95.low < 3 / 5 < without.ci95.high


def test_the_config_key_names_the_baseline_and_may_change_on_resume(tmp_path: Path) -> None:
    sweep, ids = make_sweep(tmp_path)
    run_dir = make_run(tmp_path, ids, baseline=str(sweep))
    assert "baseline" in TUNABLE_KEYS, "what the summary reports beside the score is no other run"
    written = summarize(run_dir)
    assert written["baseline"]["sweep_dir"] == str(sweep.resolve())
    assert "baseline" not in summarize(make_run(tmp_path / "plain", ids)), "no baseline: no key, as before"
    assert "untouched" not in csv_rows(tmp_path / "plain" / "based")[ids[0]]


def test_a_run_of_another_task_set_has_every_untouched_score_unknown() -> None:
    row = SweepTask(task_id="x", domain="os", outcome="passed", status="passed", evaluated=True, score=1.0)
    assert untouched_score(row, "v1") == (1.0, "")
    assert untouched_score(row, "v2") == (None, "the sweep scored OSWorld v1 tasks; this run is v2")
    nan = row.model_copy(update={"score": float("nan")})
    assert untouched_score(nan, "v1") == (None, "untouched score nan: expected a number from 0 to 1")


def summarize_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)


def test_a_bad_baseline_flag_is_one_line_exit_2(tmp_path: Path) -> None:
    _, ids = make_sweep(tmp_path)
    run_dir = make_run(tmp_path, ids)
    (tmp_path / "empty").mkdir()
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "sweep.json").write_text('{"run_id": "s", "tasks": [{"task_id": 1}]')
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "sweep.json").write_bytes(orjson.dumps({"run_id": "s", "tasks": [{"task_id": "a"}]}))
    for folder, why in ((tmp_path / "missing", "not a folder"), (tmp_path / "empty", "no sweep.json"),
                        (tmp_path / "torn", "not JSON"), (tmp_path / "foreign", "tasks[0].domain: missing")):
        done = summarize_cli(str(run_dir), "--baseline", str(folder))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("error: --baseline: ") and why in done.stderr
    assert not (run_dir / "summary").exists(), "nothing written"


def test_a_bad_baseline_key_is_one_line_naming_it(tmp_path: Path) -> None:
    _, ids = make_sweep(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"based\.json: baseline: .*empty: no sweep\.json"):
        make_run(tmp_path, ids, baseline="empty")
    config = tmp_path / "bad.json"
    config.write_bytes(orjson.dumps({"benchmark_version": "v1", "agent": "codex", "test_desktop": True,
                                     "gateway": "http://127.0.0.1:9", "tasks": ids, "baseline": "nowhere"}))
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.run_config", str(config)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "bad.json: baseline: " in done.stderr
    stored = tmp_path / "stored"
    stored.mkdir()
    resolved = parse_config({"benchmark_version": "v1", "agent": "codex", "test_desktop": True, "run_id": "r",
                             "gateway": "http://127.0.0.1:9", "tasks": ids, "results_dir": str(stored),
                             "baseline": "sweep"}, tmp_path / "r.json")
    (stored / "r").mkdir()
    body = resolved.model_dump(mode="json") | {"baseline": str(tmp_path / "empty")}
    (stored / "r" / "config.json").write_bytes(orjson.dumps(body))
    with pytest.raises(SummaryError, match=r"config\.json: baseline: .*no sweep\.json"):
        summarize(stored / "r")
