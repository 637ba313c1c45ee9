"""A run directory from before repeats and cost summarizes as it did then: every key and value of the summary
and of tasks.csv that summarize wrote for it then is still there, unchanged; what repeats add reads as k = 1."""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
import pytest

from hcu.osworld.summary.run_summary import summarize
from tests.summary.k1_run import make_k1_run

DATA = Path(__file__).parent / "data"


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def changed_values(before: object, now: object, where: str = "") -> list[str]:
    """Where `now` lost or changed a value `before` had (keys `now` adds are not changes)."""
    if isinstance(before, dict) and isinstance(now, dict):
        return [change for key, value in before.items()
                for change in changed_values(value, now.get(key, KeyError), f"{where}.{key}")]
    return [] if before == now else [f"{where}: {before!r} -> {now!r}"]


def test_a_run_directory_from_before_repeats_summarizes_unchanged(tmp_path: Path):
    run_dir = make_k1_run(tmp_path)
    summary = summarize(run_dir)
    before = orjson.loads((DATA / "k1-summary.json").read_bytes())
    assert changed_values(before, summary) == []
    assert set(summary) - set(before) == {"schema_version", "repeats", "repeat_policy", "per_task", "pass_at_k",
                                          "pass_hat_k", "run_to_run_sd", "task_list_sd", "cluster_bootstrap_ci95",
                                          "cost_usd", "cost_per_valid_result_usd", "wasted", "rate_limit_waits",
                                          "regraded"}
    assert set(summary["retried"]) - set(before["retried"]) == {"cost_usd"}
    now = rows(run_dir / "summary" / "tasks.csv")
    then = rows(DATA / "k1-tasks.csv")
    assert [{key: row[key] for key in then[0]} for row in now] == then
    assert {row["repeat"] for row in now} == {"1"}


def test_what_repeats_add_reads_as_one_repeat_per_task(tmp_path: Path):
    summary = summarize(make_k1_run(tmp_path))
    assert (summary["repeats"], summary["repeat_policy"]) == (1, "mean")
    assert summary["run_to_run_sd"] is None, "one repeat per task cannot tell run-to-run noise apart"
    per_task = {row["task_id"]: row for row in summary["per_task"]}
    assert per_task["a"] == {"task_id": "a", "domain": "os", "repeats_scored": 1, "mean": 1.0, "successes": 1,
                             "pass_at_k": 1.0, "pass_hat_k": 1.0, "cost_usd": None}
    assert per_task["g"]["repeats_scored"] == 0 and per_task["g"]["pass_at_k"] is None
    assert summary["pass_at_k"] is None, "withheld tasks leave pass@1 withheld like the score"
    assert summary["cost_usd"] is None and summary["cost_per_valid_result_usd"] is None
    assert summary["retried"]["cost_usd"] is None
    assert summary["cluster_bootstrap_ci95"]["of"] == "lower_bound"
    md = (tmp_path / "k1-legacy" / "summary" / "summary.md").read_text()
    assert "| Score (mean of 1 repeat; denominator: all 10 config tasks) | **withheld**" in md
    assert "| Cost | unknown: the config has no prices |" in md


@pytest.mark.parametrize("field", ["score", "lower_bound", "upper_bound", "coverage", "binary_rate_lower_bound"])
def test_the_headline_figures_are_plain_task_means(tmp_path: Path, field: str):
    """The k = 1 figures by hand: a task's only repeat is its score (the golden file could be wrong too)."""
    summary = summarize(make_k1_run(tmp_path))
    scores = {"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.0, "h": 1.0, "i": 0.25, "j": 0.0}  # d, j: budget, timeout
    expected = {"score": None, "lower_bound": sum(scores.values()) / 10,
                "upper_bound": (sum(scores.values()) + 3) / 10, "coverage": 0.7, "binary_rate_lower_bound": 0.2}
    assert summary[field] == (expected[field] if expected[field] is None else pytest.approx(expected[field]))
