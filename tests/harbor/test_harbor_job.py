"""`python -m hcu.osworld.export --format harbor` read by Harbor's own code: the job folder as `harbor view` scans it
(harbor.viewer.scanner), every record strictly valid under Harbor's job and trial models, the rewards, the withheld
attempts as errored trials without a reward, the stats and the mean Harbor computes itself from the trials equal to
what was written, every trajectory valid ATIF with its screenshots, an earlier hcu's ATIF-v1.5 one included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.records.sweep_file import SweepFile, SweepTask
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import write_json
from tests.harbor.harbor_env import harbor_reads
from tests.view.sample_run import Attempt, SampleRun, build_run, file_list

pytestmark = [pytest.mark.harbor]
UPSTREAM = "sk-ant-harbor-export-upstream-0123456789abcdef"
ATTEMPTS = [Attempt("t-pass", "pass"), Attempt("t-pass", "fail", repeat=2), Attempt("t-fail", "fail"),
            Attempt("t-partial", "partial"), Attempt("t-timeout", "timeout"), Attempt("t-eval", "evaluator_error"),
            Attempt("t-running", "no_result"), Attempt("t-old", "pass", steps=2)]
REWARDS = {"t-pass": 1.0, "t-pass.r2": 0.0, "t-fail": 0.0, "t-partial": 0.5, "t-timeout": 0.0, "t-old": 1.0}
WITHHELD = {"t-eval": "EvaluatorError", "t-running": "MissingResultError"}


def as_atif_15(task_dir: Path) -> None:
    """The trajectory as hcu wrote it before ATIF-v1.8: screenshots in `extra.screenshot`, content a string."""
    body = orjson.loads((task_dir / "trajectory.json").read_bytes())
    body["schema_version"] = "ATIF-v1.5"
    for step in body["steps"][1:]:
        for result in step["observation"]["results"]:
            text, image = result["content"]
            result["content"], result["extra"]["screenshot"] = text["text"], image["source"]["path"]
    write_json(task_dir / "trajectory.json", body)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[SampleRun, Path, dict]:
    root = tmp_path_factory.mktemp("harbor-job")
    sample = build_run(root, "hcu-run", ATTEMPTS, salted=True)
    as_atif_15(sample.run_dir / "tasks" / "t-old")
    out = root / "jobs"
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.export", str(sample.run_dir), "--format", "harbor",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                          env={**os.environ, "OPENAI_API_KEY": UPSTREAM})
    assert proc.returncode == 0, proc.stderr
    [job] = harbor_reads("jobs", out)["jobs"]
    return sample, out, job


def test_harbor_lists_the_run_and_reads_every_record_strictly(exported):
    sample, out, job = exported
    assert job["name"] == "hcu-run" and job["errors"] == [] and job["n_attempts"] == 2
    assert job["agents"] == [["codex", "gpt-5.5", {"reasoning_effort": "xhigh"}]]
    trials = {t["name"]: t for t in job["trials"]}
    assert sorted(trials) == sorted(a.key for a in ATTEMPTS) and job["n_total_trials"] == len(ATTEMPTS)
    assert all(t["errors"] == [] and t["scanned"] for t in trials.values()), "what harbor view lists"
    assert all((t["task_name"], t["source"], t["agent"], t["model"]) == (name.split(".r")[0], "osworld", "codex",
                                                                         "gpt-5.5") for name, t in trials.items())


def test_rewards_are_the_scores_that_count_and_withheld_attempts_are_errored_trials(exported):
    _, _, job = exported
    trials = {t["name"]: t for t in job["trials"]}
    assert {name: t["rewards"]["reward"] for name, t in trials.items() if t["reward_valid"]} == REWARDS
    for name, kind in WITHHELD.items():
        trial = trials[name]
        assert trial["rewards"] is None and not trial["reward_valid"], "never a reward of 0"
        assert trial["exception_type"] == kind and trial["has_valid_reward"] is False
        assert trial["exception_message"].startswith("withheld: ")
    assert trials["t-pass"]["tokens"] == {"input": 3000, "cache": 0, "output": 180, "cost_usd": 0.03}
    assert trials["t-running"]["tokens"] == {"input": None, "cache": None, "output": None, "cost_usd": None}


def test_the_stats_and_mean_harbor_computes_from_the_trials_are_those_written(exported):
    _, _, job = exported
    written, harbor = job["written_stats"], job["harbor_stats"]
    for field in ("n_completed_trials", "n_errored_trials"):
        assert written[field] == harbor[field], field
    assert written["n_errored_trials"] == len(WITHHELD)
    [(key, group)] = written["evals"].items()
    assert key == "codex__gpt-5.5__osworld"
    for field in ("n_trials", "n_errors", "reward_stats", "exception_stats"):
        assert group[field] == harbor["evals"][key][field], field
    mean = sum(REWARDS.values()) / len(REWARDS)
    assert group["metrics"] == [{"mean": mean}] and job["harbor_mean"] == {"mean": mean}
    assert written["n_input_tokens"] is None, "a trial's unknown tokens leave the job's total unknown"


def test_every_trajectory_is_valid_atif_with_its_screenshots_and_recordings_are_offered(exported):
    sample, out, job = exported
    for trial in job["trials"]:
        if trial["name"] == "t-running":
            assert trial["trajectory"] is None, "the attempt has none"
            continue
        report = trial["trajectory"]
        assert report["valid"] and report["errors"] == [], report
        assert report["schema_version"] == "ATIF-v1.8" and report["multimodal"]
        steps = next(a.steps for a in ATTEMPTS if a.key == trial["name"])
        assert len(report["images"]) == steps, "every screenshot, the ATIF-v1.5 one's too"
        assert trial["recording"] == (sample.run_dir / "tasks" / trial["name"] / "recording.mp4").is_file()
    assert any(t["recording"] for t in job["trials"])


def test_no_credential_or_scope_secret_in_the_export(exported):
    sample, out, _ = exported
    assert len(sample.secrets) > len(ATTEMPTS), "the run's key and each attempt's scope secret were salted in"
    files = file_list(out)
    assert not any(f.suffix == ".key" for f in files)
    for path in files:
        data = path.read_bytes()
        for secret in [*sample.secrets, UPSTREAM]:
            assert secret.encode() not in data, f"{path} holds a secret"


def test_the_do_nothing_baseline_is_a_second_metric_harbor_reads(tmp_path: Path) -> None:
    """t-pass passes untouched, t-eval's untouched state is unknown; Harbor's mean first, then the same mean without
    t-pass's trials."""
    sample = build_run(tmp_path, "based-run", [a for a in ATTEMPTS if a.task_id != "t-old"])
    sweep = tmp_path / "sweep"
    rows = [SweepTask(task_id=a.task_id, domain="os", outcome="passed", status="passed", evaluated=True,
                      score=1.0 if a.task_id == "t-pass" else 0.0) for a in ATTEMPTS if a.task_id != "t-eval"]
    write_json(sweep / "sweep.json", SweepFile(run_id="sweep-h", tasks=rows).model_dump(mode="json"))
    summarize(sample.run_dir, baseline_dir=sweep)
    out = tmp_path / "jobs"
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.export", str(sample.run_dir), "--format", "harbor",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [job] = harbor_reads("jobs", out)["jobs"]
    assert job["errors"] == []
    rewards = {key: reward for key, reward in REWARDS.items() if key != "t-old"}
    kept = [reward for key, reward in rewards.items() if not key.startswith("t-pass")]
    [group] = job["written_stats"]["evals"].values()
    assert group["metrics"] == [{"mean": sum(rewards.values()) / len(rewards)},
                                {"mean_without_untouched_passes": sum(kept) / len(kept), "tasks_passing_untouched": 1,
                                 "tasks_of_unknown_untouched_score": 1}]
    assert job["harbor_mean"] == {"mean": sum(rewards.values()) / len(rewards)}, "Harbor's own mean is untouched"
