"""pass@k and pass^k, both variance terms and the cluster bootstrap, against values worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hcu.osworld.summary.repeats import pass_at_k, pass_hat_k
from hcu.osworld.summary.run_summary import summarize
from hcu.osworld.summary.stats import cluster_bootstrap
from tests.summary.conftest import make_repeat_run, ok


@pytest.mark.parametrize("n, c, k, at_least_one, all_of", [
    (5, 2, 3, 1 - 1 / 10, 0.0),        # C(3,3)/C(5,3) = 1/10; C(2,3) = 0
    (5, 4, 2, 1.0, 6 / 10),            # C(1,2) = 0; C(4,2)/C(5,2) = 6/10
    (3, 1, 2, 1 - 1 / 3, 0.0),         # C(2,2)/C(3,2) = 1/3
    (4, 2, 1, 2 / 4, 2 / 4),           # k = 1: both are the success rate
    (6, 3, 3, 1 - 1 / 20, 1 / 20),     # C(3,3)/C(6,3) = 1/20 both ways
    (3, 0, 3, 0.0, 0.0), (3, 3, 3, 1.0, 1.0),
])
def test_unbiased_estimators(n: int, c: int, k: int, at_least_one: float, all_of: float):
    assert pass_at_k(n, c, k) == pytest.approx(at_least_one)
    assert pass_hat_k(n, c, k) == pytest.approx(all_of)


def test_fewer_attempts_than_k_give_no_estimate():
    assert pass_at_k(2, 1, 3) is None and pass_hat_k(2, 1, 3) is None


def test_pass_at_k_over_a_run_of_three_repeats(tmp_path: Path):
    run_dir = make_repeat_run(tmp_path, "pass", {"a": [ok(1.0), ok(1.0), ok(0.0)], "b": [ok(0.0)] * 3,
                                                 "c": [ok(1.0)] * 3})
    s = summarize(run_dir)
    assert (s["repeats"], s["score"]) == (3, pytest.approx((2 / 3 + 0 + 1) / 3))
    rows = {row["task_id"]: row for row in s["per_task"]}
    assert rows["a"] == {"task_id": "a", "domain": "unknown", "repeats_scored": 3, "mean": pytest.approx(2 / 3),
                         "successes": 2, "pass_at_k": 1.0, "pass_hat_k": 0.0, "cost_usd": None}
    assert (rows["b"]["pass_at_k"], rows["c"]["pass_hat_k"]) == (0.0, 1.0)
    assert s["pass_at_k"] == pytest.approx(2 / 3) and s["pass_hat_k"] == pytest.approx(1 / 3)
    assert s["binary_successes"] == 5 and s["binary_rate"] == pytest.approx(5 / 9)


def test_pass_at_k_uses_every_scored_repeat_of_a_task_that_has_more(tmp_path: Path):
    """After --rerun-discordant a task has more repeats than k: the estimator takes all n."""
    run_dir = make_repeat_run(tmp_path, "more", {"a": [ok(1.0), ok(0.0), ok(0.0), ok(0.0), ok(1.0)],
                                                 "b": [ok(1.0), ok(1.0)]},
                              tasks=[{"id": "a", "repeats": 5}, "b"], repeats=2)
    s = summarize(run_dir)
    rows = {row["task_id"]: row for row in s["per_task"]}
    assert s["repeats"] == 2
    assert rows["a"]["pass_at_k"] == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 1 - 3/10
    assert rows["a"]["pass_hat_k"] == pytest.approx(math.comb(2, 2) / math.comb(5, 2))  # 1/10
    assert s["score"] == pytest.approx((2 / 5 + 1) / 2)


def test_both_variance_terms_on_a_hand_computable_run(tmp_path: Path):
    """a: [1, 1], b: [1, 0], c: [0, 0]. Task means 1, 0.5, 0 (sample variance 0.25); within-task variances 0,
    0.5, 0. Run-to-run sd = sqrt((0 + 0.5/2 + 0) ) / 3 = 1/6. Task-list sd = sqrt((0.25 - (0.5/2)/3) / 3)
    = sqrt(1/18). Together they make the score's standard error sqrt(0.25 / 3)."""
    run_dir = make_repeat_run(tmp_path, "var", {"a": [ok(1.0), ok(1.0)], "b": [ok(1.0), ok(0.0)],
                                                "c": [ok(0.0), ok(0.0)]})
    s = summarize(run_dir)
    assert s["run_to_run_sd"] == pytest.approx(1 / 6)
    assert s["task_list_sd"] == pytest.approx(math.sqrt(1 / 18))
    assert s["run_to_run_sd"] ** 2 + s["task_list_sd"] ** 2 == pytest.approx(0.25 / 3)
    md = (run_dir / "summary" / "summary.md").read_text()
    assert "| Run-to-run sd of the score (shrinks with repeats) | 16.7 points |" in md
    assert "| Task-list sd of the score (which tasks are in the list) | 23.6 points |" in md


def test_more_repeats_shrink_the_run_to_run_term(tmp_path: Path):
    """The same per-task success rates with twice the repeats: the run-to-run sd falls (by sqrt(2) for an equal
    within-task variance; the sample variance of [1, 0, 1, 0] is 1/3 against 1/2 for [1, 0]), and the task-list
    term is what the spread of task means leaves once the within-task part is taken out."""
    two = make_repeat_run(tmp_path, "two", {"a": [ok(1.0), ok(0.0)], "b": [ok(1.0), ok(1.0)],
                                            "c": [ok(0.0), ok(0.0)], "d": [ok(1.0), ok(0.0)]})
    four = make_repeat_run(tmp_path, "four", {"a": [ok(1.0), ok(0.0)] * 2, "b": [ok(1.0)] * 4,
                                              "c": [ok(0.0)] * 4, "d": [ok(1.0), ok(0.0)] * 2})
    s2, s4 = summarize(two), summarize(four)
    assert s4["run_to_run_sd"] < s2["run_to_run_sd"]
    within2, within4 = 0.5, 1 / 3  # sample variance of [1, 0] and of [1, 0, 1, 0]
    assert s2["run_to_run_sd"] == pytest.approx(math.sqrt(2 * within2 / 2) / 4)
    assert s4["run_to_run_sd"] == pytest.approx(math.sqrt(2 * within4 / 4) / 4)
    means_var = (3 * 0.0 + 2 * 0.25) / 3  # means 0.5, 1, 0, 0.5 around 0.5: sample variance 1/6
    assert s2["task_list_sd"] == pytest.approx(math.sqrt((means_var - 2 * within2 / 2 / 4) / 4))
    assert s4["task_list_sd"] == pytest.approx(math.sqrt((means_var - 2 * within4 / 4 / 4) / 4))


def test_one_repeat_leaves_the_run_to_run_term_unknown(tmp_path: Path):
    s = summarize(make_repeat_run(tmp_path, "one", {"a": [ok(1.0)], "b": [ok(0.0)], "c": [ok(1.0)]}))
    assert s["run_to_run_sd"] is None
    assert s["task_list_sd"] == pytest.approx(math.sqrt((1 / 3) / 3))  # sample variance of 1, 0, 1 is 1/3


def test_cluster_bootstrap_by_hand_and_seeded():
    """Two tasks with means 0 and 1: a resample of two tasks has mean 0, 1/2 or 1 with chances 1/4, 1/2, 1/4,
    so the 2.5% and 97.5% points are 0 and 1. Equal task means leave no spread at all."""
    drawn = cluster_bootstrap([0.0, 1.0])
    assert (drawn.method, drawn.low, drawn.high) == ("cluster bootstrap", 0.0, 1.0)
    assert cluster_bootstrap([0.5] * 10).low == cluster_bootstrap([0.5] * 10).high == 0.5
    means = [i / 7 for i in range(7)] * 11
    assert cluster_bootstrap(means) == cluster_bootstrap(means), "the same run must give the same interval"
    assert cluster_bootstrap(means, seed=1) != cluster_bootstrap(means, seed=2)


def test_the_run_interval_resamples_tasks_with_their_repeats(tmp_path: Path):
    results = {f"t{i}": [ok(float(i % 2)), ok(float(i % 3 == 0)), ok(1.0)] for i in range(12)}
    s = summarize(make_repeat_run(tmp_path, "boot", results))
    means = [(i % 2 + (i % 3 == 0) + 1) / 3 for i in range(12)]
    expected = cluster_bootstrap(means)
    boot = s["cluster_bootstrap_ci95"]
    assert (boot["low"], boot["high"], boot["of"]) == (expected.low, expected.high, "score")
    assert boot["low"] < s["score"] < boot["high"] and boot["seed"] and boot["resamples"] == 10_000
    assert s["ci95"] == {"method": "cluster bootstrap", "low": expected.low, "high": expected.high, "of": "score"}
