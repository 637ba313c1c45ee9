"""The queue with repeats and a cost ceiling (stand-in runner): each repeat scored, with its own identity and its
own retries; raising repeats on resume runs only the added ones, lowering them is refused; no attempt starts
once the spend read from the token log reaches max_cost_usd, while running attempts finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.queue.panel import QueueRefused
from hcu.osworld.summary.run_summary import summarize
from tests.queue.conftest import wait_for

pytestmark = pytest.mark.docker

GUEST_FAIL = {"status": "error", "score": None, "failure_classification": "guest"}
PRICES = {"gpt-5.5": {"input_usd_per_mtok": 1.0, "cached_input_usd_per_mtok": 0.1, "output_usd_per_mtok": 4.0}}


def started(panel) -> list[tuple[str, int, int]]:
    return [(e["task_id"], e["repeat"], e["attempt"]) for e in panel.events() if e["event"] == "start"]


def test_each_repeat_is_scored_with_its_own_identity_and_retries(make_panel):
    panel = make_panel(["a", "b"], repeats=3, max_active_tasks=2, sleep_sec=(0.05, 0.15), outcomes={
        "a.r2": [GUEST_FAIL, {}], "b.r3": [GUEST_FAIL, GUEST_FAIL, {"status": "completed", "score": 0.0}]})
    keys = ["a", "a.r2", "a.r3", "b", "b.r2", "b.r3"]
    assert panel.run() == dict.fromkeys(keys, "finished")
    run_dir, run_id = panel.run_dir, panel.config.run_id
    assert sorted(p.name for p in (run_dir / "retries").iterdir()) == ["a.r2-1", "b.r3-1", "b.r3-2"]
    assert (run_dir / "retries" / "a.r2-1" / "runner.log").exists()
    for key, repeat, attempt in [("a", 1, 1), ("a.r2", 2, 2), ("b.r3", 3, 3)]:
        result = orjson.loads((run_dir / "tasks" / key / "result.json").read_bytes())
        assert (result["repeat"], result["attempt"], result["attempt_id"]) == (repeat, attempt,
                                                                               f"{run_id}/{key}/{attempt}")
    assert sorted(p.name for p in (run_dir / "logs").glob("*.log")) == sorted(f"{key}.log" for key in keys)
    assert sorted(started(panel)) == [("a", 1, 1), ("a", 2, 1), ("a", 2, 2), ("a", 3, 1), ("b", 1, 1),
                                      ("b", 2, 1), ("b", 3, 1), ("b", 3, 2), ("b", 3, 3)]
    scopes = [e["scope"] for e in panel.events() if e["event"] == "start"]
    assert len(set(scopes)) == 9 and f"{run_id}.b.r3.a3" in scopes and f"{run_id}.a.a1" in scopes
    summary = summarize(run_dir)
    assert (summary["repeats"], summary["attempts"], summary["retried_tasks"]) == (3, 9, 2)
    assert summary["score"] == pytest.approx((1.0 + 2 / 3) / 2)
    assert "b.r3-2: guest" in (run_dir / "QUEUE_STATUS.md").read_text()


def test_a_round_of_repeats_at_a_time(make_panel):
    panel = make_panel(["x", "y"], repeats=2, max_active_tasks=1, sleep_sec=(0.02, 0.05))
    panel.run()
    launched = [(e["task_id"], e["repeat"]) for e in panel.queue_events() if e["event"] == "launch"]
    assert launched == [("x", 1), ("y", 1), ("x", 2), ("y", 2)]


def test_raising_repeats_on_resume_runs_only_the_added_ones(make_panel):
    panel = make_panel(["a", "b"], sleep_sec=(0.02, 0.05))
    assert panel.run() == {"a": "finished", "b": "finished"}
    first = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in panel.run_dir.glob("tasks/*/result.json")}
    panel.edit(repeats=2, tasks=["a", {"id": "b", "repeats": 3}])
    dry = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(panel.config_path), "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "config: matches the stored config.json (resume)" in dry.stdout, dry.stdout
    assert "  b.r3  -  pending  attempt 1" in dry.stdout and "  a  -  finished  attempt 1" in dry.stdout
    assert panel.run() == {"a": "finished", "b": "finished", "a.r2": "finished", "b.r2": "finished",
                           "b.r3": "finished"}
    assert sorted(started(panel)) == [("a", 1, 1), ("a", 2, 1), ("b", 1, 1), ("b", 2, 1), ("b", 3, 1)]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in first} == first, "repeat 1 was touched"
    stored = orjson.loads((panel.run_dir / "config.json").read_bytes())
    assert stored["repeats"] == 2 and stored["tasks"][1]["repeats"] == 3
    assert [row["repeats_scored"] for row in summarize(panel.run_dir)["per_task"]] == [2, 3]


@pytest.mark.parametrize("lowered, key", [({"repeats": 1}, "repeats: task a would have 1 repeats, the run has 2"),
                                          ({"tasks": ["a", {"id": "b", "repeats": 1}]},
                                           "tasks[1].repeats: task b would have 1 repeats, the run has 2")])
def test_lowering_repeats_on_resume_is_refused_in_one_line_touching_nothing(make_panel, lowered: dict, key: str):
    panel = make_panel(["a", "b"], repeats=2, sleep_sec=(0.02, 0.05))
    panel.run()
    before = {p: p.read_bytes() for p in panel.run_dir.rglob("*") if p.is_file()}
    panel.edit(**lowered)
    with pytest.raises(QueueRefused, match="never lowered"):
        panel.run()
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.run_queue", str(panel.config_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert f"config.json: {key}; repeats can be raised on resume, never lowered" in out.stderr
    assert {p: p.read_bytes() for p in panel.run_dir.rglob("*") if p.is_file()} == before


def test_the_ceiling_holds_under_concurrency_and_a_higher_one_goes_on(make_panel, tmp_path: Path):
    """`big` charges $5 while it runs, once `s1` runs beside it; `s1` ($0.01) ends after that charge. From then on
    the token log holds more than max_cost_usd: no attempt starts, `big` (still running) finishes, the queue exits 1
    with the ceiling's line. A resume with a higher ceiling runs the rest."""
    marks = {name: str(tmp_path / name) for name in ("s1-started", "big-charged", "release")}
    cheap = [{"model": "gpt-5.5", "usage": {"input_tokens": 10_000, "output_tokens": 0}}]
    panel = make_panel(["big", "s1", "s2", "s3", "s4"], max_active_tasks=2, sleep_sec=(0.02, 0.05),
                       prices=PRICES, max_cost_usd=1, scenario={
                           "token_rows": {"big": [{"model": "gpt-5.5", "usage": {"input_tokens": 5_000_000}}],
                                          **{f"s{i}": cheap for i in range(1, 5)}},
                           "start_after": {"big": marks["s1-started"]},
                           "signal_file": {"s1": marks["s1-started"], "big": marks["big-charged"]},
                           "wait_file": {"s1": marks["big-charged"], "big": marks["release"]}})
    queue = panel.start()
    log = panel.run_dir / "logs" / "queue.jsonl"
    wait_for(lambda: log.exists() and any(e["event"] == "ceiling" for e in panel.queue_events()), 60, "the ceiling")
    status = (panel.run_dir / "QUEUE_STATUS.md").read_text
    wait_for(lambda: "Spend: 5.01 USD of max_cost_usd 1.00" in status(), 10, "the spend in the status")
    assert not (panel.run_dir / "tasks" / "big" / "result.json").exists(), "big is still running"
    Path(marks["release"]).touch()
    assert queue.wait(timeout=60) == 1
    assert queue.stderr.read().decode() == "error: launches stopped: max_cost_usd 1.00 reached (5.01 spent)\n"
    assert [e["task_id"] for e in panel.queue_events() if e["event"] == "launch"] == ["big", "s1"]
    assert "Raise max_cost_usd and start the queue again" in status()
    summary = summarize(panel.run_dir)
    assert [t["task_id"] for t in summary["withheld_tasks"]] == ["s2", "s3", "s4"]
    assert {row["task_id"]: row["cost_usd"] for row in summary["per_task"]} == {
        "big": 5.0, "s1": 0.01, "s2": 0.0, "s3": 0.0, "s4": 0.0}
    assert summary["cost_usd"] == pytest.approx(5.01)
    assert summary["cost_per_valid_result_usd"] == pytest.approx(2.505)

    panel.edit(max_cost_usd=100)
    assert panel.run() == dict.fromkeys(["big", "s1", "s2", "s3", "s4"], "finished")
    assert sorted(e["task_id"] for e in panel.events() if e["event"] == "start") == ["big", "s1", "s2", "s3", "s4"]
    assert summarize(panel.run_dir)["cost_usd"] == pytest.approx(5.04)


def test_the_rerun_config_runs_only_the_added_repeats_of_the_discordant_tasks(make_panel, tmp_path: Path):
    from tests.queue.conftest import Panel
    from tests.summary.conftest import make_repeat_run, ok

    panel = make_panel(["a", "b", "c"], sleep_sec=(0.02, 0.05), outcomes={"b": [{"status": "completed", "score": 0.0}]})
    panel.run()
    other = make_repeat_run(tmp_path / "other", "other", {"a": [ok(1.0)], "b": [ok(1.0)], "c": [ok(1.0)]})
    compared = summarize(panel.run_dir, other, rerun_discordant=2)["compare"]
    assert [d["task_id"] for d in compared["discordant"]] == ["b"]
    rerun = Panel(Path(compared["rerun_configs"][0]), panel.scenario_path, panel.events_path)
    assert rerun.run() == {"a": "finished", "b": "finished", "c": "finished", "b.r2": "finished",
                           "b.r3": "finished"}
    assert sorted(started(panel)) == [("a", 1, 1), ("b", 1, 1), ("b", 2, 1), ("b", 3, 1), ("c", 1, 1)]
    pooled = summarize(panel.run_dir, other)["compare"]
    assert pooled["discordant"] == [{"task_id": "b", "score": 0.0, "other_score": 1.0, "repeats": 3,
                                     "other_repeats": 1}]
