"""run_setup and evaluate through the OSWorld process against one test-desktop guest: failures, deadlines,
masking, infeasible tasks, evaluator crashes, missing functions, postconfig, and that hcu's own process never
imports OSWorld."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from hcu.osworld.attempt.failures import translate
from hcu.osworld.errors import EvaluatorError
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.evaluate import evaluate
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.setup import SetupStepError, run_setup
from hcu.osworld.osworld_bridge.tasks import load_task
from tests.guest.waiting import wait_for
from tests.official_tasks import official_task

from .conftest import GUEST_PASSWORD, write_task

pytestmark = pytest.mark.docker

RENAME_TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"
INFEASIBLE_TASK = "4783cc41-c03c-4e1b-89b4-50658f642bd5"


def offline_assets(tmp_path: Path) -> AssetCache:
    return AssetCache(root=tmp_path / "assets", offline=True)


def setup_in(osworld: tuple, task, tmp_path: Path, **kwargs):
    process, cache_dir = osworld
    return run_setup(process, task, password=GUEST_PASSWORD, cache_dir=cache_dir, assets=offline_assets(tmp_path),
                     **kwargs)


def score_in(osworld: tuple, task, tmp_path: Path, last_action: str | None):
    process, cache_dir = osworld
    return evaluate(process, task, agent_last_action=last_action, password=GUEST_PASSWORD, cache_dir=cache_dir,
                    assets=offline_assets(tmp_path))


def test_feasible_task_scores_from_the_official_metric_and_hcu_imports_no_osworld(
    test_desktop_guest, osworld, official_tasks: Path, tmp_path: Path
) -> None:
    task = load_task("v1", RENAME_TASK, "os", tasks_dir=official_tasks)
    setup_in(osworld, task, tmp_path)
    assert score_in(osworld, task, tmp_path, None).score == 0.0
    # the agent's work, done by hand: the official metric must now say 1
    test_desktop_guest.api.execute("mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2", shell=True)
    assert score_in(osworld, task, tmp_path, "DONE").score == 1.0
    # a feasible task the agent called infeasible scores 0 whatever the state
    gave_up = score_in(osworld, task, tmp_path, "FAIL")
    assert gave_up.score == 0.0 and gave_up.details["scored_by"].startswith("agent reported")
    test_desktop_guest.api.execute("rm -rf ~/Desktop/todo_list_Jan_2", shell=True)
    assert not [m for m in sys.modules if m.split(".")[0] in ("desktop_env", "torch", "easyocr", "mm_agents")]


@pytest.mark.parametrize(("last_action", "score"), [("FAIL", 1.0), (None, 0.0), ("DONE", 0.0)])
def test_infeasible_task_scores_one_only_when_the_agent_said_fail(
    osworld, official_tasks: Path, tmp_path: Path, last_action: str | None, score: float
) -> None:
    task = load_task("v1", INFEASIBLE_TASK, tasks_dir=official_tasks)
    assert task.evaluator["func"] == "infeasible"
    setup_in(osworld, task, tmp_path)
    result = score_in(osworld, task, tmp_path, last_action)
    assert result.score == score and result.metric == "infeasible"


def test_an_evaluator_crash_is_an_evaluator_error_not_a_zero(
    osworld, official_tasks: Path, tmp_path: Path
) -> None:
    raw = official_task("os", RENAME_TASK)
    raw["evaluator"]["expected"] = {"type": "rule"}  # get_rule reads config["rules"]: KeyError inside OSWorld
    write_task(tmp_path / "tasks", "os", raw)
    task = load_task("v1", RENAME_TASK, tasks_dir=tmp_path / "tasks")
    with pytest.raises(OSWorldCodeError) as caught:
        score_in(osworld, task, tmp_path, None)
    failure = translate(caught.value, "evaluator")
    assert "KeyError: 'rules'" in failure.message and failure.classification == "evaluator"


@pytest.mark.parametrize(("domain", "task_id", "missing", "what"), [
    ("vlc", "5ac2891a-eacd-4954-b339-98abba077adb", "check_play_and_exit", "metric"),
    ("multi_apps", "e8172110-ec08-421b-a6f5-842e6451911f", "check_structure_sim_with_threshold", "metric"),
    ("chrome", "93eabf48-6a27-4cb6-b963-7d5fe1e0d3a9", "get_chrome_appearance_mode_ui", "getter"),
])
def test_the_three_functions_missing_from_desktop_env_1_0_2_are_evaluator_errors(
    osworld, official_tasks: Path, tmp_path: Path, domain: str, task_id: str, missing: str, what: str
) -> None:
    raw = official_task(domain, task_id)
    raw["evaluator"].pop("postconfig", None)  # it drives apps the test desktop lacks; the lookup is the point
    write_task(tmp_path / "tasks", domain, raw)
    task = load_task("v1", task_id, domain, tasks_dir=tmp_path / "tasks")
    with pytest.raises(EvaluatorError) as caught:
        score_in(osworld, task, tmp_path, None)
    message = str(caught.value)
    assert "\n" not in message and caught.value.classification == "evaluator"
    assert f"{what} '{missing}' is not in desktop-env 1.0.2; OSWorld newer than desktop-env 1.0.2" in message


def task_with_steps(tmp_path: Path, steps: list[dict], task_id: str = "steps"):
    write_task(tmp_path / "tasks", "os", {
        "id": task_id, "instruction": "x", "config": steps,
        "evaluator": {"func": "infeasible"},
    })
    return load_task("v1", task_id, tasks_dir=tmp_path / "tasks")


def test_a_failed_step_names_its_index_type_and_parameters_without_the_password(
    osworld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task = task_with_steps(tmp_path, [
        {"type": "execute",
         "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S true", "shell": True}},
        {"type": "no_such_step", "parameters": {"path": "/tmp/x"}},
        {"type": "sleep", "parameters": {"seconds": 0}},
    ])
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SetupStepError) as caught:
        setup_in(osworld, task, tmp_path)
    message = str(caught.value)
    assert translate(caught.value, "setup").classification == "setup" and "\n" not in message
    assert message.startswith("setup step 1 (no_such_step) failed: AssertionError"), message
    assert message.endswith('parameters: {"path":"/tmp/x"}')
    first, second = caught.value.records
    assert first.ok and first.parameters["command"] == "echo {CLIENT_PASSWORD} | sudo -S true"
    assert not second.ok and second.index == 1
    def logged() -> str:
        return "\n".join(r.getMessage() for r in caplog.records)

    # OSWorld logged the filled command, in its own process (its stderr is relayed by a thread of its own) ...
    wait_for(lambda: "sudo -S true" in logged(), 10, "OSWorld's log of the first step")
    assert GUEST_PASSWORD not in logged() and GUEST_PASSWORD not in caught.value.records[0].model_dump_json()


def test_each_step_has_a_deadline_that_ends_the_osworld_process(osworld, tmp_path: Path) -> None:
    task = task_with_steps(tmp_path, [{"type": "sleep", "parameters": {"seconds": 30}}])
    process, _ = osworld
    first_pid = process.hello["pid"]
    with pytest.raises(SetupStepError, match=r"setup step 0 \(sleep\) failed: .*exceeded its 1 s deadline"):
        setup_in(osworld, task, tmp_path, step_deadline_sec=1)
    assert not Path(f"/proc/{first_pid}").exists(), "the OSWorld process outlived its deadline"
    # the next call gets a fresh process, opened on the same guest
    quick = task_with_steps(tmp_path, [{"type": "sleep", "parameters": {"seconds": 0}}], "quick")
    assert setup_in(osworld, quick, tmp_path)[0].ok
    assert process.hello["pid"] != first_pid


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
    osworld, tmp_path: Path, conj: str, first: str, score: float, metric_values: list[float]
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
    result = score_in(osworld, task, tmp_path, None)
    assert result.score == score
    assert result.details["metric_values"] == metric_values


def test_offline_setup_fetches_nothing_osworld_would_download_itself(osworld, tmp_path: Path) -> None:
    # `update_browse_history` downloads a fixed Hugging Face database inside OSWorld's own code: hcu fills it
    # from the asset cache first, and offline an empty cache is a one-line miss, not a fetch
    task = task_with_steps(tmp_path, [{"type": "update_browse_history", "parameters": {"history": []}}])
    with pytest.raises(SetupStepError) as caught:
        setup_in(osworld, task, tmp_path)
    assert "setup step 0 (update_browse_history) failed: asset https://huggingface.co/" in str(caught.value)
    assert "(offline_assets forbids downloading)" in str(caught.value)


def test_postconfig_steps_run_in_order_before_the_metric(osworld, tmp_path: Path) -> None:
    """hcu runs postconfig one step at a time (OSWorld's `evaluate` runs the list in one `setup` call): the
    steps run in the task's order, each recorded, and the metric sees their effect."""
    write_task(tmp_path / "tasks", "os", {
        "id": "post", "instruction": "x", "config": [],
        "evaluator": {
            "postconfig": [
                {"type": "execute", "parameters": {"command": "echo one > /tmp/post.txt", "shell": True}},
                {"type": "execute", "parameters": {"command": "echo two >> /tmp/post.txt", "shell": True}},
            ],
            "func": "check_include_exclude",
            "result": {"type": "vm_command_line", "command": "tr '\\n' ' ' < /tmp/post.txt", "shell": True},
            "expected": rule({"include": ["one two"], "exclude": []}),
        },
    })
    task = load_task("v1", "post", tasks_dir=tmp_path / "tasks")
    result = score_in(osworld, task, tmp_path, None)
    assert result.score == 1.0
    assert [step["index"] for step in result.details["postconfig"]] == [0, 1]
