"""The canary sweep without guests: which tasks it runs, what counts as done when it resumes, that a resume on
other settings is refused, and what sweep.json and sweep.md say (the sweep itself: test_sweep.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.defaults import RETRIES
from hcu.osworld.canary import sweep as sweep_module
from hcu.osworld.canary import sweep_report
from hcu.osworld.canary.attempt import CanaryReport
from hcu.osworld.canary.sweep import (
    STATE_NAME,
    Sweep,
    SweepError,
    SweepOptions,
    SweepState,
    final_report,
    report_path,
    select_tasks,
)
from hcu.osworld.osworld_bridge.evaluate import EvalResult
from hcu.osworld.records.result import EmptyGetter
from hcu.osworld.stand_ins import asset_source as sources
from hcu.record_io import write_record
from tests.official_tasks import OFFICIAL_TASKS


def options(tmp_path: Path, **more: object) -> SweepOptions:
    return SweepOptions.model_validate({"out": tmp_path / "sweep", "tasks_dir": OFFICIAL_TASKS, "test_desktop": True,
                                        **more})


def test_the_index_is_filtered_in_its_own_order(tmp_path: Path) -> None:
    every = select_tasks(options(tmp_path))
    assert len(every) == 369
    one_each = select_tasks(options(tmp_path, per_domain=1))
    assert [t.domain for t in one_each] == ["chrome", "gimp", "libreoffice_calc", "libreoffice_impress",
                                            "libreoffice_writer", "multi_apps", "os", "thunderbird", "vlc", "vs_code"]
    assert [t.id for t in select_tasks(options(tmp_path, domains=["vlc"], per_domain=2))] == [
        t.id for t in every if t.domain == "vlc"][:2]
    chosen = select_tasks(options(tmp_path, task_ids=["a10b69e1-6034-4a2b-93e1-571d45194f75"]))
    assert [(t.domain, t.id[:8]) for t in chosen] == [("thunderbird", "a10b69e1")]
    with pytest.raises(SweepError, match="--domains: spreadsheets not in .*test_all.json"):
        select_tasks(options(tmp_path, domains=["spreadsheets"]))
    with pytest.raises(SweepError, match="--task-ids: nope not in"):
        select_tasks(options(tmp_path, task_ids=["nope"]))


def report(task, status: str, *, score: float | None = None, classification: str | None = None,
           error: str | None = None, empty: list[str] = (), stand_ins: bool = True) -> CanaryReport:
    evaluator = None if score is None else EvalResult(
        score=score, metric="m", details={}, getters_read_nothing=[EmptyGetter(getter=g, reason="404") for g in empty])
    return CanaryReport(status=status, benchmark_version="v1", task_id=task.id, task_domain=task.domain,
                        task_sha256=task.sha256, guest_kind="test-desktop", guest_image="img", volume_size_gb=64,
                        evaluator=evaluator, failure_classification=classification, error=error, stand_ins=stand_ins)


def test_reports_count_per_domain_and_list_what_needs_a_look(tmp_path: Path) -> None:
    opts = options(tmp_path, domains=["vlc", "vs_code"], per_domain=3, asset_stand_ins=True)
    tasks = select_tasks(opts)
    vlc = [t for t in tasks if t.domain == "vlc"]
    code = next(t for t in tasks if t.domain == "vs_code")
    written = [(vlc[0], report(vlc[0], "passed", score=0.0)),
               (vlc[1], report(vlc[1], "passed", score=1.0)),  # feasible: a broken check or a stand-in collision
               (vlc[2], report(vlc[2], "failed", score=0.0, classification="evaluator", empty=["vlc_config"],
                               error="the evaluator could not read the state: vlc_config: 404")),
               (code, report(code, "failed", classification="setup", error="setup step 1 (launch) failed: 'code'"))]
    for task, canary in written:
        write_record(report_path(opts.out, task), canary)
    state = SweepState(run_id="sweep-x", settings={"asset_stand_ins": True})
    sweep = sweep_report.write(opts.out, tasks, state)
    assert sweep["domains"]["vlc"] | {"canary_sec": 0} == {
        "tasks": 3, "evaluated": 3, "passed": 2, "getter_read_nothing": 1, "not_run": 0,
        "untouched_scores": {"0": 2, "1": 1}, "nonzero_untouched_feasible": [vlc[1].id], "failures": {},
        "setup_commands_exiting_nonzero": 0, "canary_sec": 0}
    assert sweep["domains"]["vs_code"]["failures"] == {"setup": 1} and sweep["domains"]["vs_code"]["not_run"] == 2
    page = (opts.out / "sweep.md").read_text()
    assert page.count("STAND-IN ASSETS") == 1
    assert f"- vlc/{vlc[1].id}: 1" in page and f"- vs_code/{code.id} [setup]: setup step 1 (launch)" in page
    assert "Not run yet (2)" in page
    domain_page = (opts.out / "tasks" / "vlc" / "sweep.md").read_text()
    assert "STAND-IN ASSETS" in domain_page and "vs_code" not in domain_page


def test_an_interrupted_canary_runs_again_and_a_resume_keeps_the_settings(tmp_path: Path) -> None:
    opts = options(tmp_path, domains=["vlc"], per_domain=2)
    first, second = select_tasks(opts)
    write_record(report_path(opts.out, first), report(first, "passed", score=0.0))
    write_record(report_path(opts.out, second), report(second, "failed", classification="interrupted"))
    assert final_report(report_path(opts.out, first)) is not None
    assert final_report(report_path(opts.out, second)) is None
    write_record(opts.out / STATE_NAME, SweepState(run_id="sweep-x", settings={"asset_stand_ins": False}))
    with pytest.raises(SweepError, match="a sweep with other settings ran here"):
        Sweep(options(tmp_path, domains=["vlc"], asset_stand_ins=True)).state()


def test_a_canary_whose_guest_failed_runs_again_at_once_and_on_resume(tmp_path: Path, monkeypatch) -> None:
    """The sweep's workers (forked processes, so the canary below stands in for the real one there too) run a
    canary whose guest failed again at once, up to the table's attempts, and a resume runs it again."""
    opts = options(tmp_path, domains=["vlc"], per_domain=2, max_parallel=1, osworld_python=sys.executable)
    flaky, steady = select_tasks(opts)
    runs = tmp_path / "runs.txt"

    def canary(options, *, asset_source, stops, osworld) -> CanaryReport:
        assert asset_source is sources.asset_source  # the command chooses the task files' source, not the runner
        with runs.open("a") as f:
            f.write(options.task_id + "\n")
        seen = runs.read_text().split().count(options.task_id)
        task = flaky if options.task_id == flaky.id else steady
        guest_fails = task.id == flaky.id and seen < 3
        done = (report(task, "failed", classification="guest", error="guest not ready in 1 s") if guest_fails
                else report(task, "passed", score=0.0))
        write_record(options.result_dir / "report.json", done)
        return done

    monkeypatch.setattr(sweep_module, "run", canary)
    monkeypatch.setattr(Sweep, "_remove_leftovers", lambda self, run_id: None)
    Sweep(opts).execute([flaky, steady])
    assert sorted(runs.read_text().split()) == sorted([flaky.id] * 3 + [steady.id])
    assert final_report(report_path(opts.out, flaky)).status == "passed"
    write_record(report_path(opts.out, steady), report(steady, "failed", classification="guest", error="died"))
    assert final_report(report_path(opts.out, steady)) is None  # a resume runs it again
    runs.unlink()

    def always_failing(options, *, asset_source, stops, osworld) -> CanaryReport:
        with runs.open("a") as f:
            f.write(options.task_id + "\n")
        return report(steady, "failed", classification="guest", error="guest not ready in 1 s")

    monkeypatch.setattr(sweep_module, "run", always_failing)
    Sweep(opts).execute([flaky, steady])
    assert runs.read_text().split() == [steady.id] * RETRIES.attempts  # then it stays a failure until the next resume


def test_bad_flags_exit_2_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.canary_sweep", "--out", str(tmp_path / "s"),
                           "--tasks-dir", str(OFFICIAL_TASKS), "--test-desktop", "--domains", "nope"],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--domains: nope not in" in done.stderr
