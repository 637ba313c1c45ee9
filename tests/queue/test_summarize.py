"""Summaries of hand-made run directories: every scoring rule of the reference, intervals, comparison."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.run_config import load_config, parse_config
from hcu.osworld.summary.run_summary import summarize
from hcu.osworld.summary.stats import bootstrap_mean, paired_difference, wilson


def make_run(root: Path, run_id: str, results: dict[str, dict | None], *,
             retries: dict[str, int] | None = None, tasks: list | None = None, **config) -> Path:
    """A run directory: config.json as the queue stores it, and result.json files with only what is given."""
    body = {"run_id": run_id, "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(root),
            "tasks": tasks or list(results), **config}
    resolved = parse_config(body, root / f"{run_id}.json")
    run_dir = resolved.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_bytes(orjson.dumps(resolved.model_dump(mode="json")))
    for task_id, result in results.items():
        if result is not None:
            (run_dir / "tasks" / task_id).mkdir(parents=True)
            (run_dir / "tasks" / task_id / "result.json").write_bytes(orjson.dumps(result))
    for task_id, count in (retries or {}).items():
        for n in range(1, count + 1):
            retry = run_dir / "retries" / f"{task_id}-{n}"
            retry.mkdir(parents=True)
            (retry / "result.json").write_bytes(orjson.dumps(
                {"status": "error", "failure_classification": "guest", "duration_sec": 100.0}))
    return run_dir


def ok(score: float, **more) -> dict:
    return {"status": "completed", "score": score, "termination_reason": "completed", **more}


def csv_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "summary" / "tasks.csv").open() as f:
        return list(csv.DictReader(f))


def test_minimal_results_and_a_complete_binary_run(tmp_path: Path):
    results = {f"t{i}": ok(1.0 if i < 9 else 0.0) for i in range(20)}
    s = summarize(make_run(tmp_path, "full", results))
    assert (s["tasks"], s["valid"], s["withheld"], s["coverage"]) == (20, 20, 0, 1.0)
    assert s["score"] == s["lower_bound"] == s["binary_rate"] == pytest.approx(0.45)
    assert s["ci95"]["method"] == "wilson" and s["ci95"]["of"] == "score"
    assert (round(s["ci95"]["low"], 4), round(s["ci95"]["high"], 4)) == (0.2582, 0.6579)


def test_missing_and_errored_tasks_withhold_the_score(tmp_path: Path):
    results = {"a": ok(1.0), "b": ok(1.0), "c": ok(0.0), "d": {"status": "evaluator_error"},
               "e": {"status": "error", "failure_classification": "runner"}, "f": None,
               "g": {"status": "error", "failure_classification": "guest"}}
    run_dir = make_run(tmp_path, "withheld", {**results, "torn": ok(1.0)})
    (run_dir / "tasks" / "torn" / "result.json").write_bytes(b'{"status": "compl')
    results["torn"] = None
    s = summarize(run_dir)
    assert s["score"] is None and s["withheld"] == 5 and s["valid"] == 3
    assert s["lower_bound"] == pytest.approx(2 / 8) and s["upper_bound"] == pytest.approx(7 / 8)
    assert s["coverage"] == pytest.approx(3 / 8) and s["ci95"]["of"] == "lower_bound"
    assert {t["task_id"]: t["reason"] for t in s["withheld_tasks"]} == {
        "d": "evaluator_error", "e": "error", "f": "missing", "g": "error", "torn": "unreadable"}
    rows = csv_rows(run_dir)
    assert [r["task_id"] for r in rows] == list(results) and rows[5]["status"] == "missing"
    assert rows[3]["score"] == "" and "withheld" in (run_dir / "summary" / "summary.md").read_text()


def test_budget_and_timeout_score_zero_even_when_the_evaluator_passed(tmp_path: Path):
    budget = {"status": "completed", "score": 1.0, "termination_reason": "max_model_calls"}
    results = {"a": ok(1.0), "b": budget,
               "c": {"status": "completed", "score": 1.0, "termination_reason": "timeout"},
               "d": {"status": "completed", "score": None, "termination_reason": "timeout"},
               "e": {"status": "completed", "score": 0.0, "evaluator_score": 1.0,
                     "termination_reason": "max_model_calls"}}
    run_dir = make_run(tmp_path, "budget", results)
    s = summarize(run_dir)
    assert s["score"] == pytest.approx(0.2) and s["withheld"] == 0
    assert s["zeroed_by_budget_or_timeout"] == 4 and s["zeroed_though_evaluator_passed"] == 3
    assert s["terminations"] == {"completed": 1, "max_model_calls": 2, "timeout": 2}
    assert [(r["score"], r["evaluator_score"]) for r in csv_rows(run_dir)][3:] == [("0.0", ""), ("0.0", "1.0")]


def test_tokens_count_only_fully_accounted_tasks(tmp_path: Path):
    usage = {"model_calls": 10, "input_tokens": 1000, "output_tokens": 100, "fully_accounted": True}
    partial = {**usage, "input_tokens": 99999, "fully_accounted": False}
    results = {"a": ok(1.0, usage=usage), "b": ok(0.0, usage=partial), "c": ok(1.0)}
    run_dir = make_run(tmp_path, "tokens", results)
    s = summarize(run_dir)
    assert s["tokens"]["accounted_tasks"] == 1 and s["tokens"]["input_tokens"] == 1000
    assert s["tokens"]["total"] == 1100 and s["tokens"]["per_valid_result"] == 1100
    assert s["model_calls"] == 20
    assert [r["tokens"] for r in csv_rows(run_dir)] == ["1100", "", ""]


def test_partial_scores_get_a_seeded_bootstrap_interval(tmp_path: Path):
    scores = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.0, 1.0, 0.5, 0.0] * 3
    s = summarize(make_run(tmp_path, "partial", {f"t{i}": ok(v) for i, v in enumerate(scores)}))
    mean = sum(scores) / len(scores)
    assert s["ci95"]["method"] == "bootstrap" and s["ci95"]["low"] < mean < s["ci95"]["high"]
    assert s["binary_successes"] == 9 and s["binary_rate"] == pytest.approx(0.3)
    assert bootstrap_mean(scores) == bootstrap_mean(scores), "the bootstrap must be deterministic"
    sd = (sum((v - mean) ** 2 for v in scores) / (len(scores) - 1)) ** 0.5
    width = s["ci95"]["high"] - s["ci95"]["low"]
    assert width == pytest.approx(2 * 1.96 * sd / len(scores) ** 0.5, rel=0.15)


def test_wilson_edges():
    assert wilson(0, 10).low == 0.0 and 0.25 < wilson(0, 10).high < 0.35
    assert wilson(10, 10).high == 1.0 and wilson(0, 0).high == 1.0


def test_attempts_machine_time_domains_strata_and_scripted_banner(tmp_path: Path):
    tasks = [{"id": "a", "task_domain": "os", "stratum": "easy"}, {"id": "b", "task_domain": "os"},
             {"id": "c", "task_domain": "vlc", "stratum": "hard"}]
    results = {"a": ok(1.0, duration_sec=50.0), "b": ok(0.0, duration_sec=30.0),
               "c": {"status": "evaluator_error", "duration_sec": 20.0}}
    run_dir = make_run(tmp_path, "groups", results, tasks=tasks, retries={"a": 2}, scripted_model=True)
    s = summarize(run_dir)
    assert s["attempts"] == 5 and s["retried_tasks"] == 1
    assert s["machine_sec"] == pytest.approx(300.0)
    assert s["machine_sec_per_valid_result"] == pytest.approx(150)
    assert s["by_domain"]["os"]["score"] == 0.5 and s["by_domain"]["vlc"]["withheld"] == 1
    assert set(s["by_stratum"]) == {"easy", "hard"} and s["by_stratum"]["hard"]["score"] is None
    md = (run_dir / "summary" / "summary.md").read_text()
    assert md.splitlines()[2].startswith("> **SCRIPTED MODEL") and "## By stratum" in md
    assert [r["attempts"] for r in csv_rows(run_dir)] == ["3", "1", "1"]


def test_paired_comparison_lists_discordant_tasks_and_writes_the_rerun_configs(tmp_path: Path):
    mine = {"same1": ok(1.0), "same0": ok(0.0), "up": ok(1.0), "up2": ok(1.0), "down": ok(0.0),
            "gone": {"status": "error"}, "only_mine": ok(1.0)}
    theirs = {"same1": ok(1.0), "same0": ok(0.0), "up": ok(0.0), "up2": ok(0.0), "down": ok(1.0),
              "gone": ok(1.0), "only_theirs": ok(0.0)}
    a, b = make_run(tmp_path, "mine", mine), make_run(tmp_path, "theirs", theirs, model="other-model")
    c = summarize(a, b)["compare"]
    assert (c["common_tasks"], c["paired_tasks"], c["not_comparable"]) == (6, 5, ["gone"])
    assert [d["task_id"] for d in c["discordant"]] == ["up", "up2", "down"]
    assert (c["this_better"], c["other_better"]) == (2, 1)
    expected = paired_difference([1, 0, 1, 1, 0], [1, 0, 0, 0, 1])
    assert c["mean_difference"] == pytest.approx(0.2) and c["ci95"]["low"] == expected.interval.low
    assert c["rerun_configs"] == [] and c["sign_settled"] is False, "configs only when asked for"
    c = summarize(a, b, rerun_discordant=2)["compare"]
    rerun = load_config(c["rerun_configs"][0])
    assert rerun.run_id == "mine" and rerun.run_dir == a and rerun.token_log == a / "gateway-tokens.jsonl"
    assert {t.id: rerun.repeats_of(t) for t in rerun.tasks} == {
        "same1": 1, "same0": 1, "up": 3, "up2": 3, "down": 3, "gone": 1, "only_mine": 1}
    other = load_config(c["rerun_configs"][1])
    assert (other.run_id, other.model) == ("theirs", "other-model") and other.run_dir == b
    assert [t.id for t in other.tasks if other.repeats_of(t) == 3] == ["up", "up2", "down"]
    md = (a / "summary" / "summary.md").read_text()
    assert "Paired comparison with theirs" in md and "The sign is not settled" in md


def test_not_a_run_directory_is_one_line_exit_2(tmp_path: Path):
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path}: no config.json (not a run directory)"


def test_budget_or_timeout_scores_zero_even_when_the_evaluator_then_failed(tmp_path: Path):
    """the budget or the timeout decided the task; an evaluator error after it is still 0."""
    results = {"a": ok(1.0),
               "b": {"status": "evaluator_error", "failure_classification": "evaluator", "score": 0.0,
                     "termination_reason": "max_model_calls"},
               "c": {"status": "evaluator_error", "termination_reason": "timeout"},
               "d": {"status": "evaluator_error", "failure_classification": "evaluator",
                     "termination_reason": "completed"}}
    s = summarize(make_run(tmp_path, "evalfail", results))
    assert [t["task_id"] for t in s["withheld_tasks"]] == ["d"]
    assert s["lower_bound"] == pytest.approx(1 / 4) and s["zeroed_by_budget_or_timeout"] == 2


def test_attempts_per_class_and_what_retried_attempts_spent(tmp_path: Path):
    """per class, how many attempts ended there (tasks/ and
    retries/); the tokens and model calls of retried attempts next to the scored ones'."""
    usage = {"model_calls": 4, "input_tokens": 400, "output_tokens": 40, "fully_accounted": True}
    results = {"a": ok(1.0, usage=usage), "b": {"status": "error", "failure_classification": "upstream_error"},
               "c": {"status": "error", "failure_classification": "configuration"}}
    run_dir = make_run(tmp_path, "classes", results, retries={"a": 2})
    spent = {"status": "error", "failure_classification": "upstream_rate_limit", "duration_sec": 30.0,
             "usage": {**usage, "model_calls": 3, "input_tokens": 300, "output_tokens": 30}}
    (run_dir / "retries" / "a-2" / "result.json").write_bytes(orjson.dumps(spent))
    no_result = run_dir / "retries" / "b-1"
    no_result.mkdir()
    (no_result / "retry.json").write_bytes(orjson.dumps({"task_id": "b", "attempt": 1, "reason": "gone",
                                                          "failure_classification": "interrupted", "moved_at": 5.0}))
    s = summarize(run_dir)
    assert s["attempts_by_class"] == {
        "clean": {"attempts": 1, "retried": False, "scored": True},
        "configuration": {"attempts": 1, "retried": False, "scored": False},
        "guest": {"attempts": 1, "retried": True, "scored": False},
        "interrupted": {"attempts": 1, "retried": True, "scored": False},
        "upstream_error": {"attempts": 1, "retried": True, "scored": False},
        "upstream_rate_limit": {"attempts": 1, "retried": True, "scored": False}}
    assert s["tokens"]["total"] == 440
    retried = s["retried"]
    assert (retried["attempts"], retried["model_calls"], retried["total"], retried["accounted_attempts"]) == (
        3, 3, 330, 1)
    md = (run_dir / "summary" / "summary.md").read_text()
    assert "## Attempts by how they ended" in md and "| upstream_rate_limit | 1 | yes | no |" in md
    assert "| Retried attempts (not scored, spent) | 3:" in md and "330 tokens" in md
