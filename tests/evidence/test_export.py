"""`python -m hcu.osworld.export`: an hcu run in OSWorld's result layout, read back the way OSWorld's
show_result.py reads a result folder (domain folders, task folders, a float in result.txt); withheld tasks
marked and never a 0; repeats apart; the results' permissions; no credential in what is written."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from PIL import Image

from hcu import REPO_ROOT
from hcu.osworld.evidence.atif import (
    Agent,
    Observation,
    ObservationResult,
    Pointer,
    ResultExtra,
    Step,
    ToolCall,
    Trajectory,
    iso_time,
)
from hcu.osworld.records.layout import TRAJECTORY_FILE
from hcu.osworld.records.result import TaskResult

UPSTREAM = "sk-ant-hcu-export-test-upstream-0123456789"
MODEL = "claude-opus-5"


def jpeg(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 36), colour).save(out, format="JPEG")
    return out.getvalue()


def trajectory(task_dir: Path, final: str) -> Trajectory:
    (task_dir / "steps").mkdir(parents=True)
    (task_dir / "steps" / "p-00001.jpg").write_bytes(jpeg((200, 10, 10)))
    at = 1_796_000_000.0
    click = ObservationResult(source_call_id="c1", content="clicked left x1 at (5, 6)", extra=ResultExtra(
        screenshot="steps/p-00001.jpg", pointer=Pointer(x=10, y=12, screen_width=1920, screen_height=1080),
        host_started_at=iso_time(at + 1)))
    wait = ObservationResult(source_call_id="c2", content="waited 1 s",
                             extra=ResultExtra(host_started_at=iso_time(at + 2)))
    steps = [
        Step(step_id=1, source="user", message="Do the task."),
        Step(step_id=2, source="agent", timestamp=iso_time(at), message=f"Clicking. (key {UPSTREAM})",
             tool_calls=[ToolCall(tool_call_id="c1", function_name="mcp__cu__click", arguments={"x": 5, "y": 6}),
                         ToolCall(tool_call_id="c2", function_name="mcp__cu__wait", arguments={"seconds": 1})],
             observation=Observation(results=[click, wait])),
        Step(step_id=3, source="agent", timestamp=iso_time(at + 3), message=final),
    ]
    return Trajectory(session_id="s", agent=Agent(name="claude-code", version="2.1.332", model_name=MODEL),
                      steps=steps)


def task(run_dir: Path, folder: str, result: TaskResult, *, raw_extra: dict | None = None,
         final: str = "Done.\nTASK_COMPLETE") -> Path:
    task_dir = run_dir / "tasks" / folder
    task_dir.mkdir(parents=True)
    body = orjson.loads(orjson.dumps(result.model_dump(mode="json"))) | (raw_extra or {})
    (task_dir / "result.json").write_bytes(orjson.dumps(body))
    os.chmod(task_dir / "result.json", 0o640)
    (task_dir / TRAJECTORY_FILE).write_bytes(trajectory(task_dir, final).model_dump_json().encode())
    return task_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    common = dict(model=MODEL, agent="claude-code", task_domain="os")
    solved = task(run, "t-solved", TaskResult(status="completed", score=1.0, evaluator_score=1.0,
                                              termination_reason="completed", task_id="t-solved", **common),
                  raw_extra={"repeat": 1, "cost_usd": None})
    (solved / "recording.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + os.urandom(64))
    task(run, "t-solved.r2", TaskResult(status="completed", score=0.0, evaluator_score=0.0,
                                        termination_reason="completed", task_id="t-solved", **common),
         raw_extra={"repeat": 2, "cost_usd": 0.25})
    task(run, "t-budget", TaskResult(status="completed", score=0.0, evaluator_score=1.0, task_id="t-budget",
                                     termination_reason="max_model_calls", **{**common, "task_domain": "chrome"}))
    task(run, "t-guest", TaskResult(status="error", failure_classification="guest", task_id="t-guest", **common))
    task(run, "t-infeasible", TaskResult(status="completed", score=1.0, evaluator_score=1.0, task_id="t-infeasible",
                                         termination_reason="completed", protocol_word="TASK_INFEASIBLE", **common),
         final="No such setting.\nTASK_INFEASIBLE")
    return run


def show_result_view(target_dir: Path) -> dict[str, dict[str, float]]:
    """What OSWorld's show_result.py counts: every task folder holding result.txt, its text as a float."""
    found: dict[str, dict[str, float]] = {}
    for domain in sorted(os.listdir(target_dir)):
        if not (target_dir / domain).is_dir():
            continue
        for example in sorted(os.listdir(target_dir / domain)):
            folder = target_dir / domain / example
            if "result.txt" in os.listdir(folder):
                found.setdefault(domain, {})[example] = float((folder / "result.txt").read_text())
    return found


def test_the_export_reads_as_osworld_reads_its_own_results(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OSW_ANTHROPIC_UPSTREAM_TOKEN", UPSTREAM)
    out = tmp_path / "export"
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.export", str(run_dir), "--format", "osworld",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    base = out / "computer_use" / "mcp"
    assert show_result_view(base / MODEL) == {"os": {"t-solved": 1.0, "t-infeasible": 1.0}, "chrome": {"t-budget": 0.0}}
    assert show_result_view(base / f"{MODEL}.r2") == {"os": {"t-solved": 0.0}}, "a repeat reads as a run of its own"
    withheld = base / MODEL / "os" / "t-guest"
    assert not (withheld / "result.txt").exists(), "a withheld task is never written as a score"
    assert (withheld / "withheld.txt").read_text().strip() == "error: guest"
    assert orjson.loads((withheld / "traj.jsonl").read_bytes().splitlines()[-1]) == {"Error": "withheld: error: guest"}
    solved = base / MODEL / "os" / "t-solved"
    lines = [orjson.loads(line) for line in (solved / "traj.jsonl").read_bytes().splitlines()]
    assert [(line["step_num"], line["action"] if isinstance(line["action"], str) else line["action"]["action_type"],
             line["done"]) for line in lines] == [(1, "click", False), (1, "wait", False), (2, "DONE", True)]
    assert set(lines[0]) == {"step_num", "action_timestamp", "action", "response", "reward", "done", "info",
                             "screenshot_file"}
    assert lines[0]["action"]["parameters"] == {"x": 5, "y": 6} and lines[0]["action_timestamp"].startswith("2026")
    assert lines[0]["screenshot_file"] == lines[1]["screenshot_file"] == f"step_1_{lines[0]['action_timestamp']}.png"
    with Image.open(solved / lines[0]["screenshot_file"]) as shot:
        assert shot.format == "PNG" and shot.getpixel((30, 20))[0] > 150
    assert (solved / "recording.mp4").read_bytes() == (run_dir / "tasks" / "t-solved" / "recording.mp4").read_bytes()
    infeasible = (base / MODEL / "os" / "t-infeasible" / "traj.jsonl").read_bytes().splitlines()
    assert orjson.loads(infeasible[-1])["action"] == "FAIL"
    index = {(t["task_id"], t["repeat"]): t for t in orjson.loads((out / "hcu-export.json").read_bytes())}
    assert index[("t-solved", 1)]["cost_usd"] is None and index[("t-solved", 2)]["cost_usd"] == 0.25
    assert index[("t-guest", 1)]["score"] is None and index[("t-guest", 1)]["withheld"] == "error: guest"
    written = [p for p in base.rglob("*") if p.is_file()]
    assert {p.stat().st_mode & 0o777 for p in written} == {0o640}, "the results' permissions"
    assert not any(UPSTREAM.encode() in p.read_bytes() for p in [*written, out / "hcu-export.json"])


def test_bad_flags_exit_2_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hcu.osworld.export", str(tmp_path), "--format", "osworld",
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 2 and "run_dir" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def export(run_dir: Path, out: Path, fmt: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.export", str(run_dir), "--format", fmt, "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def test_the_harbor_export_marks_withheld_attempts_as_errors_and_holds_no_credential(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OSW_ANTHROPIC_UPSTREAM_TOKEN", UPSTREAM)
    out = tmp_path / "jobs"
    proc = export(run_dir, out, "harbor")
    assert proc.returncode == 0, proc.stderr
    assert f"harbor view {out}" in proc.stdout and "1 withheld" in proc.stdout
    job = out / "run"
    trials = {p.name: orjson.loads((p / "result.json").read_bytes()) for p in job.iterdir() if p.is_dir()}
    assert sorted(trials) == ["t-budget", "t-guest", "t-infeasible", "t-solved", "t-solved.r2"]
    withheld = trials["t-guest"]
    assert withheld["verifier_result"] is None, "a withheld attempt has no reward, not a 0"
    assert withheld["exception_info"]["exception_type"] == "GuestError"
    assert withheld["exception_info"]["policy_override"] == {"has_valid_reward": False}
    assert trials["t-budget"]["verifier_result"] == {"rewards": {"reward": 0.0}}, "the budget's 0 is a score"
    assert trials["t-solved"]["verifier_result"] == {"rewards": {"reward": 1.0}}
    assert (trials["t-solved.r2"]["agent_result"]["cost_usd"], trials["t-solved"]["agent_result"]["cost_usd"]) == (
        0.25, None), "an unknown cost stays unknown"
    stats = orjson.loads((job / "result.json").read_bytes())["stats"]
    assert stats["n_errored_trials"] == 1 and stats["cost_usd"] is None
    assert stats["evals"][f"claude-code__{MODEL}__osworld"]["metrics"] == [{"mean": 0.5}], "(1 + 0 + 0 + 1) / 4"
    trajectory = orjson.loads((job / "t-solved" / "agent" / "trajectory.json").read_bytes())
    click = trajectory["steps"][1]["observation"]["results"][0]
    assert click["content"][1] == {"type": "image", "source": {"media_type": "image/jpeg",
                                                               "path": "steps/p-00001.jpg"}}
    assert "screenshot" not in click["extra"], "the ATIF-v1.5 screenshot is an image part now"
    assert (job / "t-solved" / "agent" / "steps" / "p-00001.jpg").read_bytes() == (
        run_dir / "tasks" / "t-solved" / "steps" / "p-00001.jpg").read_bytes()
    assert (job / "t-solved" / "agent" / "recording.mp4").is_file()
    attempt_files = [p for p in job.rglob("*") if p.is_file() and p.parent != job]
    assert {p.stat().st_mode & 0o777 for p in attempt_files} == {0o640}, "the results' permissions"
    assert not any(UPSTREAM.encode() in p.read_bytes() for p in out.rglob("*") if p.is_file())


@pytest.mark.parametrize("fmt", ["osworld", "harbor"])
def test_an_export_replaces_an_earlier_one_of_its_format_and_refuses_any_other_folder(run_dir, tmp_path, fmt):
    out = tmp_path / "out"
    assert export(run_dir, out, fmt).returncode == 0
    (out / "stale-from-an-earlier-export.txt").write_text("x")
    assert export(run_dir, out, fmt).returncode == 0, "an earlier export of the same format is replaced"
    assert not (out / "stale-from-an-earlier-export.txt").exists(), "nothing of the earlier export is left"
    other = "harbor" if fmt == "osworld" else "osworld"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for target, words in [(out, f"export in the {fmt} format"), (mine, "not an earlier hcu export"),
                          (run_dir / "exported", "overlaps the run directory")]:
        proc = export(run_dir, target, other if target == out else fmt)
        assert proc.returncode == 2 and words in proc.stderr, (target, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    assert (mine / "notes.txt").read_text() == "keep me" and not (run_dir / "exported").exists()


def test_a_screenshot_the_attempt_lost_is_left_out_of_the_harbor_trajectory_and_said_so(run_dir, tmp_path):
    (run_dir / "tasks" / "t-budget" / "steps" / "p-00001.jpg").unlink()
    assert export(run_dir, tmp_path / "jobs", "harbor").returncode == 0
    trial = tmp_path / "jobs" / "run" / "t-budget"
    click = orjson.loads((trial / "agent" / "trajectory.json").read_bytes())["steps"][1]["observation"]["results"][0]
    assert click["content"] == "clicked left x1 at (5, 6)", "its text stays; no image part names a missing file"
    facts = orjson.loads((trial / "result.json").read_bytes())["agent_result"]["metadata"]["hcu"]
    assert facts["trajectory"] == "ATIF-v1.8, 3 steps, 1 missing images left out"
    assert not (trial / "agent" / "steps").exists()
