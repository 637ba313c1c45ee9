"""a stop signal is never an evaluator, setup or guest failure. SIGTERM in each phase (boot,
setup, probe, agent, evaluate) ends the attempt as interrupted infrastructure (retried by the queue, never
scored); result.json is written and the guest removed. Each phase is held open by something that blocks (a
guest API that never answers, a ten-minute setup or postconfig step, a gateway that never answers, a model
that hangs), so the signal lands in the phase under test."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcu.demo.stand_in import scripted_stack
from hcu.osworld.errors import policy_for
from hcu.osworld.records.result import TaskResult
from tests.failures.conftest import StartedTask, StartFn, labelled_containers, write_policies
from tests.run_task.conftest import LOOK_STEPS, RENAME_MATCH, RENAME_TASK, policy

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.osworld]


def interrupt_in(task: StartedTask, phase: str) -> TaskResult:
    task.wait_until(lambda: task.phase() == phase, f"the {phase} phase")
    task.terminate()
    result, code = task.finish()
    assert (result.status, result.failure_classification, result.score) == ("error", "interrupted", None), \
        task.log()[-3000:]
    assert code == 1, "run_task exits non-zero on an error"
    policy = policy_for(result.failure_classification)
    assert policy.retry and not policy.scored
    ended = {p.name: p for p in result.phases}
    assert ended[phase].status == "failed", result.phases
    assert ended[phase].error.startswith("Interrupted: runner received SIGTERM"), ended[phase].error
    assert [p.name for p in result.phases][-2:] == ["collect", "cleanup"], "the attempt was still recorded"
    assert labelled_containers(result.run_id) == [], "the guest was removed"
    return result


def test_sigterm_during_boot(start_task: StartFn, unanswering_desktop: str, silent_gateway: str) -> None:
    interrupt_in(start_task(RENAME_TASK, gateway=silent_gateway, extra_args=["--test-desktop", unanswering_desktop]),
                 "boot")


def test_sigterm_during_setup(start_task: StartFn, blocking_tasks: Path, silent_gateway: str) -> None:
    interrupt_in(start_task("setup-blocks", gateway=silent_gateway, tasks_dir=blocking_tasks), "setup")


def test_sigterm_during_probe(start_task: StartFn, silent_gateway: str) -> None:
    """The probe's gateway check waits on a gateway that never answers."""
    interrupt_in(start_task(RENAME_TASK, gateway=silent_gateway), "probe")


def test_sigterm_during_agent(start_task: StartFn, tmp_path: Path) -> None:
    hangs = policy(RENAME_MATCH, LOOK_STEPS, faults=[{"kind": "hang", "at_step": 0}])
    with scripted_stack("codex", write_policies(tmp_path, {"hangs": hangs}), token_log=tmp_path / "tokens.jsonl",
                        max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        interrupt_in(start_task(RENAME_TASK, gateway=stack.gateway_url, token_log=stack.token_log), "agent")


def test_sigterm_during_evaluation(start_task: StartFn, blocking_tasks: Path, tmp_path: Path) -> None:
    looks = policy(RENAME_MATCH, LOOK_STEPS)
    with scripted_stack("codex", write_policies(tmp_path, {"looks": looks}), token_log=tmp_path / "tokens.jsonl",
                        max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        task = start_task("evaluation-blocks", gateway=stack.gateway_url, token_log=stack.token_log,
                          tasks_dir=blocking_tasks)
        result = interrupt_in(task, "evaluate")
    assert result.termination_reason == "completed" and result.evaluator_score is None
