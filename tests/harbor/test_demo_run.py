"""A run the project really produced (the built-in demo: the runner, a real CLI, computer-use in the test desktop,
OSWorld's evaluator) exported as a Harbor job and read by Harbor's own code: every trial's trajectory valid ATIF
with the screens of its steps, the rewards the scores summarize gave, and Harbor's mean hcu's score."""

from __future__ import annotations

import csv

import pytest

from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.evidence.atif import SCHEMA_VERSION
from hcu.osworld.evidence.harbor_export import export_harbor_job
from hcu.record_io import read_record
from tests.demo_panel import EXPECTED_SCORE, DemoRun
from tests.harbor.harbor_env import harbor_reads

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.harbor]


@pytest.mark.timeout(1500)
def test_the_demo_run_reads_in_harbor_with_its_scores_and_screens(demo_run: DemoRun, tmp_path) -> None:
    with (demo_run.run_dir / "summary" / "tasks.csv").open() as f:
        scores = {row["task_id"]: float(row["score"]) for row in csv.DictReader(f)}
    for task in scores:
        meta = read_record(demo_run.run_dir / "tasks" / task / "meta.json", AttemptMeta)
        assert meta.trajectory and meta.trajectory.written and meta.trajectory.agent_steps > 0, meta.trajectory
    export_harbor_job(demo_run.run_dir, tmp_path / "jobs")
    [job] = harbor_reads("jobs", tmp_path / "jobs")["jobs"]
    assert job["errors"] == [] and job["name"] == demo_run.run_dir.name
    trials = {trial["name"]: trial for trial in job["trials"]}
    assert {name: trial["rewards"]["reward"] for name, trial in trials.items()} == scores
    assert job["harbor_mean"] == {"mean": EXPECTED_SCORE}
    for trial in trials.values():
        report = trial["trajectory"]
        assert report["valid"] and report["errors"] == [], report
        assert report["schema_version"] == SCHEMA_VERSION and report["images"], "the screens of its steps"
