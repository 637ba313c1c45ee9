"""What summarize refuses to count: a result whose score is not a number from 0 to 1 is unreadable (withheld,
counted and listed as such, never averaged in), and a stored config it cannot read is named by its key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.summary.run_summary import summarize
from tests.summary.conftest import make_repeat_run, ok


@pytest.mark.parametrize("text, shown", [(b"NaN", "nan"), (b"1.5", "1.5"), (b"-0.25", "-0.25"),
                                         (b'"nan"', "nan"), (b"Infinity", "inf")])
def test_a_score_outside_0_to_1_is_unreadable_and_withheld(tmp_path: Path, text: bytes, shown: str):
    run_dir = make_repeat_run(tmp_path, "odd", {"x": [ok(1.0)], "y": [ok(0.0)]})
    (run_dir / "tasks" / "y" / "result.json").write_bytes(
        b'{"status": "completed", "termination_reason": "completed", "score": ' + text + b"}")
    s = summarize(run_dir)
    assert (s["score"], s["valid"], s["coverage"], s["lower_bound"]) == (None, 1, 0.5, 0.5)
    assert s["statuses"] == {"completed": 1, "unreadable": 1}
    assert s["withheld_tasks"] == [{"task_id": "y",
                                    "reason": f"unreadable: score {shown}: expected a number from 0 to 1"}]
    md = (run_dir / "summary" / "summary.md").read_text()
    assert "nan%" not in md and "inf%" not in md and "- y: unreadable: score" in md


def test_an_evaluator_score_outside_0_to_1_is_unreadable_too(tmp_path: Path):
    run_dir = make_repeat_run(tmp_path, "odd", {"x": [ok(0.0, termination_reason="timeout", evaluator_score=2.0)]})
    s = summarize(run_dir)
    assert s["score"] is None and s["withheld_tasks"][0]["reason"].startswith("unreadable: evaluator_score 2.0")


def test_a_bad_stored_config_is_named_by_its_key(tmp_path: Path):
    run_dir = make_repeat_run(tmp_path, "bad", {"x": [ok(1.0)]})
    config = orjson.loads((run_dir / "config.json").read_bytes())
    (run_dir / "config.json").write_bytes(orjson.dumps(config | {"repeats": 0}))
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.summarize", str(run_dir)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    path = run_dir / "config.json"
    assert f"error: {path}: repeats: Input should be greater than or equal to 1 (got 0)" in out.stderr
