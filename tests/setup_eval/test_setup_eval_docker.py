"""run_setup and evaluate in-process against one test-desktop guest: failures, deadlines, masking,
infeasible tasks, evaluator crashes, and what gets imported."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from hcu.osworld.errors import EvaluatorError, SetupError
from hcu.osworld.osworld_bridge.evaluate import evaluate
from hcu.osworld.osworld_bridge.setup import SetupStepError, run_setup
from hcu.osworld.tasks import load_task
from tests.official_tasks import official_task

from .conftest import GUEST_PASSWORD, write_task

pytestmark = pytest.mark.docker

RENAME_TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"
INFEASIBLE_TASK = "4783cc41-c03c-4e1b-89b4-50658f642bd5"


def setup_and_score(guest, task, tmp_path: Path, last_action: str | None):
    cache = tmp_path / "osworld-cache"
    run_setup(guest, task, osworld_cache_dir=cache, asset_cache=tmp_path / "assets", offline_assets=True)
    return evaluate(guest, task, agent_last_action=last_action, osworld_cache_dir=cache)


def test_feasible_task_scores_from_the_official_metric_and_imports_no_heavy_module(
    test_desktop_guest, official_tasks: Path, tmp_path: Path
) -> None:
    task = load_task("v1", RENAME_TASK, "os", tasks_dir=official_tasks)
    assert setup_and_score(test_desktop_guest, task, tmp_path, None).score == 0.0
    # the agent's work, done by hand: the official metric must now say 1
    test_desktop_guest.api.execute("mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2", shell=True)
    done = evaluate(test_desktop_guest, task, agent_last_action="DONE", osworld_cache_dir=tmp_path / "c")
    assert done.score == 1.0
    # a feasible task the agent called infeasible scores 0 whatever the state
    gave_up = evaluate(test_desktop_guest, task, agent_last_action="FAIL", osworld_cache_dir=tmp_path / "c")
    assert gave_up.score == 0.0
    test_desktop_guest.api.execute("rm -rf ~/Desktop/todo_list_Jan_2", shell=True)
    assert "desktop_env.evaluators.metrics.docs" not in sys.modules
    assert not {"torch", "easyocr", "transformers"} & set(sys.modules)


@pytest.mark.parametrize(("last_action", "score"), [("FAIL", 1.0), (None, 0.0), ("DONE", 0.0)])
def test_infeasible_task_scores_one_only_when_the_agent_said_fail(
    test_desktop_guest, official_tasks: Path, tmp_path: Path, last_action: str | None, score: float
) -> None:
    task = load_task("v1", INFEASIBLE_TASK, tasks_dir=official_tasks)
    assert task.evaluator["func"] == "infeasible"
    result = setup_and_score(test_desktop_guest, task, tmp_path, last_action)
    assert result.score == score and result.metric == "infeasible"


def test_an_evaluator_crash_is_an_evaluator_error_not_a_zero(
    test_desktop_guest, official_tasks: Path, tmp_path: Path
) -> None:
    raw = official_task("os", RENAME_TASK)
    raw["evaluator"]["expected"] = {"type": "rule"}  # get_rule reads config["rules"]: KeyError inside OSWorld
    write_task(tmp_path / "tasks", "os", raw)
    task = load_task("v1", RENAME_TASK, tasks_dir=tmp_path / "tasks")
    with pytest.raises(EvaluatorError, match="KeyError: 'rules'") as caught:
        evaluate(test_desktop_guest, task, agent_last_action=None, osworld_cache_dir=tmp_path / "c")
    assert caught.value.classification == "evaluator"


def test_an_unknown_metric_is_an_evaluator_error(
    test_desktop_guest, official_tasks: Path, tmp_path: Path
) -> None:
    raw = official_task("os", RENAME_TASK)
    raw["evaluator"]["func"] = "check_play_and_exit"  # a newer task file's metric, absent from 1.0.2
    write_task(tmp_path / "tasks", "os", raw)
    task = load_task("v1", RENAME_TASK, tasks_dir=tmp_path / "tasks")
    with pytest.raises(EvaluatorError, match="metric 'check_play_and_exit' is not in desktop_env"):
        evaluate(test_desktop_guest, task, agent_last_action=None, osworld_cache_dir=tmp_path / "c")


def task_with_steps(tmp_path: Path, steps: list[dict]):
    write_task(tmp_path / "tasks", "os", {
        "id": "steps", "instruction": "x", "config": steps,
        "evaluator": {"func": "infeasible"},
    })
    return load_task("v1", "steps", tasks_dir=tmp_path / "tasks")


def test_a_failed_step_names_its_index_type_and_parameters_without_the_password(
    test_desktop_guest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task = task_with_steps(tmp_path, [
        {"type": "execute",
         "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S true", "shell": True}},
        {"type": "no_such_step", "parameters": {"path": "/tmp/x"}},
        {"type": "sleep", "parameters": {"seconds": 0}},
    ])
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SetupStepError) as caught:
        run_setup(test_desktop_guest, task, osworld_cache_dir=tmp_path / "c", asset_cache=None,
                  offline_assets=True)
    message = str(caught.value)
    assert isinstance(caught.value, SetupError) and "\n" not in message
    assert message.startswith("setup step 1 (no_such_step) failed: AssertionError")
    assert message.endswith('parameters: {"path":"/tmp/x"}')
    first, second = caught.value.records
    assert first.ok and first.parameters["command"] == "echo {CLIENT_PASSWORD} | sudo -S true"
    assert not second.ok and second.index == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sudo -S true" in logged  # OSWorld logged the filled command ...
    assert GUEST_PASSWORD not in logged and GUEST_PASSWORD not in caught.value.records[0].model_dump_json()


def test_each_step_has_a_deadline(test_desktop_guest, tmp_path: Path) -> None:
    task = task_with_steps(tmp_path, [{"type": "sleep", "parameters": {"seconds": 30}}])
    with pytest.raises(SetupStepError, match=r"setup step 0 \(sleep\) exceeded its 1 s deadline") as caught:
        run_setup(test_desktop_guest, task, osworld_cache_dir=tmp_path / "c", asset_cache=None,
                  offline_assets=True, step_deadline_sec=1)
    assert not caught.value.records[0].ok


def rule(value: object) -> dict:
    return {"type": "rule", "rules": value}


@pytest.mark.parametrize(
    ("conj", "first", "score", "metric_values"),
    [
        ("and", "abcd", 0.875, [1.0, 0.75]),  # mean of the metrics
        ("and", "zzzz", 0.0, [0.0]),  # stops at the first 0
        ("or", "zzzz", 0.75, [0.0, 0.75]),  # max of the metrics
        ("or", "abcd", 1.0, [1.0]),  # stops at the first 1
    ],
)
def test_metric_lists_combine_as_osworld_does(
    test_desktop_guest, tmp_path: Path, conj: str, first: str, score: float, metric_values: list[float]
) -> None:
    write_task(tmp_path / "tasks", "os", {
        "id": "combine", "instruction": "x", "config": [],
        "evaluator": {
            "func": ["exact_match", "fuzzy_match"], "conj": conj,
            "result": [rule(first), rule("abce")],
            "expected": [rule({"expected": "abcd"}), rule({"expected": "abcd"})],
        },
    })
    task = load_task("v1", "combine", tasks_dir=tmp_path / "tasks")
    result = evaluate(test_desktop_guest, task, agent_last_action=None, osworld_cache_dir=tmp_path / "c")
    assert result.score == score
    assert result.details["metric_values"] == metric_values


def test_offline_setup_fetches_nothing_osworld_would_download_itself(
    test_desktop_guest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # `update_browse_history` downloads a fixed Hugging Face database inside OSWorld's own code
    task = task_with_steps(tmp_path, [{"type": "update_browse_history", "parameters": {"history": []}}])
    caplog.set_level(logging.ERROR, logger="desktopenv.setup")
    with pytest.raises(SetupStepError, match=r"setup step 0 \(update_browse_history\) failed"):
        run_setup(test_desktop_guest, task, osworld_cache_dir=tmp_path / "c", asset_cache=tmp_path / "a",
                  offline_assets=True)
    # OSWorld's own error message loses the cause (it re-raises an unbound name); its log keeps it
    logged = [r.getMessage() for r in caplog.records]
    assert any("offline_assets forbids fetching https://huggingface.co/" in m for m in logged), logged
