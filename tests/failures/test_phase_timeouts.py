"""timeout_seconds is per phase, as the reference says: boot, setup, probe, agent and evaluation each end at it
with their own timeout type and class (the agent's case: tests/run_task), in run_task and in the canary alike.
A deadline is a BaseException: no `except Exception` on the way (the MCP probe has one) can turn it into the
failure of what it interrupted."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.attempt.runner import PhaseLog
from hcu.osworld.canary.attempt import CanaryReport
from hcu.osworld.errors import (
    BootTimeout,
    EvaluationTimeout,
    PhaseTimeout,
    ProbeTimeout,
    SetupTimeout,
    policy_for,
)
from hcu.record_io import read_record
from tests.failures.conftest import StartFn, write_policies
from tests.run_task.conftest import LOOK_STEPS, RENAME_MATCH, RENAME_TASK, TASKS_DIR, policy
from tests.session import TEST_DESKTOP_IMAGE, unique_run_id


@pytest.mark.parametrize("phase, overrun, classification", [
    ("boot", BootTimeout, "guest"), ("setup", SetupTimeout, "setup"), ("probe", ProbeTimeout, "probe"),
    ("evaluate", EvaluationTimeout, "evaluator")])
def test_a_phase_ends_at_its_deadline_with_its_own_timeout(phase: str, overrun: type[PhaseTimeout],
                                                           classification: str) -> None:
    """Wherever the phase is blocked (here: waiting on an event nobody sets), its deadline ends it."""
    log = PhaseLog("test/t/1")
    with pytest.raises(overrun) as ended, log.phase(phase, timeout_sec=0.2, overrun=overrun):
        threading.Event().wait(60)
    assert isinstance(ended.value, PhaseTimeout) and ended.value.classification == classification
    assert not isinstance(ended.value, Exception), "no `except Exception` may swallow a deadline"
    assert "overran its timeout of 0.2 s (timeout_seconds)" in str(ended.value)
    assert [(p.name, p.status) for p in log.phases] == [(phase, "failed")]


@pytest.mark.docker
@pytest.mark.artifacts
def test_boot_ends_at_timeout_seconds(start_task: StartFn, unanswering_desktop: str, silent_gateway: str) -> None:
    task = start_task(RENAME_TASK, gateway=silent_gateway,
                      extra_args=["--test-desktop", unanswering_desktop, "--timeout-seconds", "5"])
    result, code = task.finish()
    assert (result.status, result.failure_classification, code) == ("error", "guest", 1), task.log()[-3000:]
    assert "phase boot overran its timeout of 5 s" in result.failure_message
    assert policy_for("guest").retry
    guest = read_record(task.result_dir / "meta.json", AttemptMeta).guest
    stopped = guest.readiness[-1]
    assert (stopped.name, stopped.ok) == ("api answers", False), "where the boot stopped is on record"
    assert stopped.error.startswith("BootTimeout: phase boot overran") and Path(guest.console_log).is_file()


@pytest.mark.docker
@pytest.mark.artifacts
@pytest.mark.osworld
def test_setup_ends_at_timeout_seconds(start_task: StartFn, blocking_tasks: Path, silent_gateway: str) -> None:
    """The task's ten-minute setup step is cut at 40 s, and nothing of it lingers (the OSWorld process dies)."""
    task = start_task("setup-blocks", gateway=silent_gateway, tasks_dir=blocking_tasks,
                      extra_args=["--timeout-seconds", "40"])
    result, code = task.finish()
    assert (result.status, result.failure_classification, code) == ("error", "setup", 1), task.log()[-3000:]
    assert "phase setup overran its timeout of 40 s" in result.failure_message


@pytest.mark.docker
@pytest.mark.artifacts
@pytest.mark.osworld
def test_evaluation_ends_at_timeout_seconds(start_task: StartFn, blocking_tasks: Path, tmp_path: Path) -> None:
    """A stuck evaluator (a ten-minute postconfig step) ends at 40 s as an evaluator error, never a zero."""
    looks = policy(RENAME_MATCH, LOOK_STEPS)
    with scripted_stack("codex", write_policies(tmp_path, {"looks": looks}), token_log=tmp_path / "tokens.jsonl",
                        max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        task = start_task("evaluation-blocks", gateway=stack.gateway_url, token_log=stack.token_log,
                          tasks_dir=blocking_tasks, extra_args=["--timeout-seconds", "40"])
        result, code = task.finish()
    assert (result.status, result.failure_classification, result.score, code) == (
        "evaluator_error", "evaluator", None, 1), task.log()[-3000:]
    assert "phase evaluate overran its timeout of 40 s" in result.failure_message


@pytest.fixture
def hanging_mcp_server(tmp_path: Path) -> Path:
    """A computer-use that starts and never answers: the MCP probe waits on it."""
    server = tmp_path / "computer-use"
    server.write_text("#!/bin/sh\nexec sleep 600\n")
    server.chmod(0o755)
    return server


@pytest.mark.docker
@pytest.mark.artifacts
@pytest.mark.osworld
def test_a_probe_overrun_in_run_task_is_a_probe_timeout(start_task: StartFn, tmp_path: Path,
                                                        hanging_mcp_server: Path) -> None:
    with scripted_stack("codex", write_policies(tmp_path, {"looks": policy(RENAME_MATCH, LOOK_STEPS)}),
                        token_log=tmp_path / "tokens.jsonl", max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        task = start_task(RENAME_TASK, gateway=stack.gateway_url, token_log=stack.token_log,
                          extra_args=["--timeout-seconds", "40", "--mcp-binary", str(hanging_mcp_server)])
        result, code = task.finish()
    assert (result.status, result.failure_classification, code) == ("error", "probe", 1), task.log()[-3000:]
    assert result.failure_message.startswith("phase probe overran its timeout of 40 s"), result.failure_message
    status = {p.name: p.status for p in result.phases}
    assert (status["probe"], status["collect"], status["cleanup"]) == ("failed", "ok", "ok")


@pytest.mark.docker
@pytest.mark.artifacts
@pytest.mark.osworld
def test_a_probe_overrun_in_the_canary_is_a_probe_timeout(tmp_path: Path, hanging_mcp_server: Path) -> None:
    out = tmp_path / "canary"
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--task-id", RENAME_TASK, "--task-domain", "os",
         "--tasks-dir", str(TASKS_DIR), "--test-desktop", TEST_DESKTOP_IMAGE, "--result-dir", str(out),
         "--probe", "--mcp-binary", str(hanging_mcp_server), "--timeout-seconds", "40", "--offline-assets",
         "--run-id", unique_run_id("canary-probe")], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    report = read_record(out / "report.json", CanaryReport)
    assert (done.returncode, report.status, report.failure_classification) == (1, "failed", "probe"), done.stderr
    assert report.error.startswith("phase probe overran its timeout of 40 s"), report.error
    assert report.setup_steps and all(step.ok for step in report.setup_steps), "the probe ran on a set-up desktop"
