"""Comparisons with repeats: task means paired, the discordant tasks listed, whether the sign is settled, and
--rerun-discordant K: both runs' configs with K more repeats on exactly those tasks, same run ids; once those
repeats are in, the next comparison pools everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.records.identity import repeat_key
from hcu.osworld.run_config import load_config
from hcu.osworld.summary.run_summary import summarize
from hcu.osworld.summary.stats import paired_difference
from tests.summary.conftest import make_repeat_run, ok

SAME = {f"t{i}": [ok(float(i % 2)), ok(float(i % 2))] for i in range(8)}


def add_repeats(run_dir: Path, config_path: str, results: dict[str, list[float]]) -> None:
    """What run_queue leaves after running the rerun config: it becomes config.json, the added repeats' results
    land in tasks/<task>.r<n>/."""
    (run_dir / "config.json").write_bytes(orjson.dumps(load_config(config_path).model_dump(mode="json")))
    for task_id, scores in results.items():
        for repeat, score in enumerate(scores, start=3):
            folder = run_dir / "tasks" / repeat_key(task_id, repeat)
            folder.mkdir(parents=True)
            (folder / "result.json").write_bytes(orjson.dumps({"repeat": repeat, **ok(score)}))


def test_task_means_are_compared_and_the_discordant_tasks_rerun_until_pooled(tmp_path: Path):
    a = make_repeat_run(tmp_path, "a", {**SAME, "d1": [ok(1.0), ok(1.0)], "d2": [ok(1.0), ok(0.0)]})
    b = make_repeat_run(tmp_path, "b", {**SAME, "d1": [ok(0.0), ok(1.0)], "d2": [ok(0.0), ok(0.0)]})
    c = summarize(a, b)["compare"]
    assert [(d["task_id"], d["score"], d["other_score"]) for d in c["discordant"]] == [("d1", 1.0, 0.5),
                                                                                     ("d2", 0.5, 0.0)]
    expected = paired_difference([float(i % 2) for i in range(8)] + [1.0, 0.5], [float(i % 2) for i in range(8)]
                                 + [0.5, 0.0])
    assert c["mean_difference"] == pytest.approx(0.1) and c["ci95"]["low"] == expected.interval.low
    assert c["ci95"]["low"] < 0 < c["ci95"]["high"] and c["sign_settled"] is False

    out = subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", str(a), "--compare", str(b),
                          "--rerun-discordant", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "The sign is not settled" in out.stdout
    mine, theirs = orjson.loads((a / "summary" / "summary.json").read_bytes())["compare"]["rerun_configs"]
    for path, run_dir in ((mine, a), (theirs, b)):
        config = load_config(path)
        assert config.run_dir == run_dir, "the same run: run_queue on it runs only the added repeats"
        assert {t.id: config.repeats_of(t) for t in config.tasks if config.repeats_of(t) != 2} == {"d1": 4, "d2": 4}

    add_repeats(a, mine, {"d1": [1.0, 1.0], "d2": [1.0, 1.0]})
    add_repeats(b, theirs, {"d1": [0.0, 0.0], "d2": [0.0, 0.0]})
    c = summarize(a, b)["compare"]
    assert [(d["task_id"], d["score"], d["other_score"], d["repeats"]) for d in c["discordant"]] == [
        ("d1", 1.0, 0.25, 4), ("d2", 0.75, 0.0, 4)]
    assert c["mean_difference"] == pytest.approx((0.75 + 0.75) / 10)
    assert c["sign_settled"] is (c["ci95"]["low"] > 0)


def test_a_settled_sign_says_so(tmp_path: Path):
    a = make_repeat_run(tmp_path, "a", {f"t{i}": [ok(1.0), ok(1.0)] for i in range(6)})
    b = make_repeat_run(tmp_path, "b", {f"t{i}": [ok(0.0), ok(1.0 if i == 0 else 0.0)] for i in range(6)})
    c = summarize(a, b)["compare"]
    assert c["sign_settled"] is True and c["ci95"]["low"] > 0 and len(c["discordant"]) == 6
    assert "The sign is settled: the interval excludes 0, so this run is better." in (
        a / "summary" / "summary.md").read_text()


def test_a_task_without_all_its_repeats_is_not_compared(tmp_path: Path):
    a = make_repeat_run(tmp_path, "a", {"x": [ok(1.0), None], "y": [ok(1.0), ok(1.0)]})
    b = make_repeat_run(tmp_path, "b", {"x": [ok(0.0), ok(0.0)], "y": [ok(1.0), ok(0.0)]})
    c = summarize(a, b)["compare"]
    assert c["not_comparable"] == ["x"] and c["paired_tasks"] == 1 and c["ci95"] is None
    assert c["sign_settled"] is False


def test_rerun_discordant_needs_compare_and_a_positive_k(tmp_path: Path):
    a = make_repeat_run(tmp_path, "a", {"x": [ok(1.0)]})
    for args, message in ((["--rerun-discordant", "2"], "--rerun-discordant: needs --compare OTHER_RUN_DIR"),
                          (["--compare", str(a), "--rerun-discordant", "0"], "expected an integer >= 1")):
        out = subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", str(a), *args], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_the_same_scores_in_another_order_are_not_discordant(tmp_path: Path):
    """A float sum depends on order ((0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1): task means are compared exactly."""
    a = make_repeat_run(tmp_path, "a", {"x": [ok(0.1), ok(0.2), ok(0.3)], "y": [ok(1.0), ok(0.0), ok(0.0)]})
    b = make_repeat_run(tmp_path, "b", {"x": [ok(0.3), ok(0.2), ok(0.1)], "y": [ok(0.0), ok(0.0), ok(1.0)]})
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", str(a), "--compare", str(b),
                          "--rerun-discordant", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    c = orjson.loads((a / "summary" / "summary.json").read_bytes())["compare"]
    assert (c["discordant"], c["this_better"], c["other_better"], c["rerun_configs"]) == ([], 0, 0, [])
    assert c["mean_difference"] == 0.0
    assert not (a / "summary" / "rerun-discordant.json").exists()
