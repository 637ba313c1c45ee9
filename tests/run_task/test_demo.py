"""The README's first command: the built-in demo panel ends in a summary with the stated expected score."""

from __future__ import annotations

import orjson
import pytest

from hcu import REPO_ROOT
from tests.demo_panel import EXPECTED_SCORE, DemoRun

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]


@pytest.mark.timeout(1500)
def test_demo_summary_matches_the_expected_score(demo_run: DemoRun) -> None:
    summary = orjson.loads((demo_run.run_dir / "summary" / "summary.json").read_bytes())
    assert (summary["score"], summary["coverage"], summary["tasks"]) == (EXPECTED_SCORE, 1.0, 5)
    assert summary["scripted_model"] is True
    assert "SCRIPTED MODEL" in demo_run.stdout, "summary.md is printed and labels the stand-in model"
    assert sorted(summary["by_domain"]) == ["chrome", "os", "vlc"], "the panel spans three domains"
    assert "Expected score 4/5 = 0.8" in (REPO_ROOT / "README.md").read_text().replace("**", "").replace(
        "expected score", "Expected score")
