"""summary.md's lines that summarize figures of several repeats: the tasks whose repeats disagree (pass/fail or
partial) and the binary success rate, whose figures agree whatever each task's repeat count."""

from __future__ import annotations

from pathlib import Path

from hcu.osworld.summary.run_summary import summarize
from tests.summary.conftest import make_repeat_run, ok


def md_of(run_dir: Path) -> str:
    summarize(run_dir)
    return (run_dir / "summary" / "summary.md").read_text()


def test_partial_scores_that_disagree_are_listed(tmp_path: Path):
    md = md_of(make_repeat_run(tmp_path, "mixed", {"pf": [ok(1.0), ok(0.0)], "partial": [ok(0.5), ok(0.0)],
                                                   "same": [ok(0.5), ok(0.5)], "ones": [ok(1.0), ok(1.0)]}))
    assert "## Tasks whose repeats disagree (2)" in md
    assert "- pf: 1 of 2 succeeded" in md and "- partial: scores 0.5, 0 (mean 0.25)" in md
    assert "- same:" not in md and "- ones:" not in md


def test_the_binary_rate_and_its_count_agree_when_repeat_counts_differ(tmp_path: Path):
    """One task asks for 1 repeat and succeeds, the other for 3 and fails them all: the mean of per-task rates is
    50%, while 1 of 4 repeats succeeded; summary.md must not print 1/4 = 50%."""
    run_dir = make_repeat_run(tmp_path, "uneven", {"once": [ok(1.0)], "thrice": [ok(0.0), ok(0.0), ok(0.0)]},
                              tasks=[{"id": "once", "repeats": 1}, {"id": "thrice"}])
    line = next(line for line in md_of(run_dir).splitlines() if line.startswith("| Binary success"))
    assert line.startswith("| Binary success (score 1.0): mean of per-task success rates, missing repeats count 0 "
                           "| 50.0% (")
    assert line.endswith("; 1 of 4 repeats succeeded |") and "1/4" not in line
