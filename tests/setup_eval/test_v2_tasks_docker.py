"""V2-shaped task classes (tests/setup_eval/v2_tasks) on the test desktop, through the OSWorld process: their
own setup and evaluate, partial credit kept, a deadline that stops a setup before it writes into the guest,
and offline assets refusing a fetch made by a task's own code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hcu.osworld.attempt.failures import translate
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.evaluate import evaluate
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.setup import SetupStepError, run_setup
from hcu.osworld.osworld_bridge.tasks import load_task

from .conftest import GUEST_PASSWORD

pytestmark = pytest.mark.docker

V2_TASKS = Path(__file__).resolve().parent / "v2_tasks"
NOTES = "/home/user/Desktop/notes.txt"


def setup_v2(osworld: tuple, task_id: str, tmp_path: Path, **kwargs):
    process, cache_dir = osworld
    task = load_task("v2", task_id, tasks_dir=V2_TASKS)
    return task, run_setup(process, task, password=GUEST_PASSWORD, cache_dir=cache_dir,
                           assets=AssetCache(root=tmp_path / "assets", offline=True), **kwargs)


def score_v2(osworld: tuple, task, tmp_path: Path):
    process, cache_dir = osworld
    return evaluate(process, task, agent_last_action=None, password=GUEST_PASSWORD, cache_dir=cache_dir,
                    assets=AssetCache(root=tmp_path / "assets", offline=True))


def test_a_v2_class_sets_up_the_guest_and_keeps_partial_credit(test_desktop_guest, osworld, tmp_path: Path) -> None:
    api = test_desktop_guest.api
    api.execute(f"mkdir -p ~/Desktop && echo stale > {NOTES}", shell=True)
    task, records = setup_v2(osworld, "901", tmp_path)
    assert [(r.type, r.ok) for r in records] == [("task_class.setup", True)]
    assert api.execute(f"test -e {NOTES} && echo present || echo absent", shell=True).output.strip() == "absent"
    assert score_v2(osworld, task, tmp_path).score == 0.0
    api.execute(f"printf 'hello v2\\n' > {NOTES}", shell=True)
    half = score_v2(osworld, task, tmp_path)
    assert (half.score, half.metric) == (0.5, "task_class.evaluate")
    assert half.details["task_result"]["lines"] == ["hello v2"]
    api.execute(f"printf 'hello v2\\ndone\\n' > {NOTES}", shell=True)
    assert score_v2(osworld, task, tmp_path).score == 1.0


def test_after_a_deadline_nothing_of_the_setup_reaches_the_guest(test_desktop_guest, osworld, tmp_path: Path) -> None:
    api = test_desktop_guest.api
    api.execute("rm -f /tmp/hcu-late-write", shell=True)
    process, _ = osworld
    process.call("hello", {}, deadline_sec=60, what="hello")  # the child that will run the setup
    group = process.hello["pid"]
    with pytest.raises(SetupStepError, match=r"task_class.setup\) failed: .*exceeded its 1 s deadline"):
        setup_v2(osworld, "902", tmp_path, step_deadline_sec=1)
    with pytest.raises(ProcessLookupError):  # the setup's process group is gone: nothing of it can write later
        os.killpg(group, 0)
    marker = api.execute("test -e /tmp/hcu-late-write && echo written || echo absent", shell=True).output
    assert marker.strip() == "absent"


def test_offline_assets_refuse_a_fetch_by_the_tasks_own_code(osworld, tmp_path: Path) -> None:
    with pytest.raises(SetupStepError) as caught:
        setup_v2(osworld, "903", tmp_path)
    message = str(caught.value)
    assert "offline_assets forbids fetching https://assets.hcu.invalid" in message and "\n" not in message


def test_a_v2_evaluate_that_raises_is_an_evaluator_error(osworld, tmp_path: Path) -> None:
    task = load_task("v2", "901", tasks_dir=V2_TASKS)
    broken = task.model_copy(update={"id": "no-such-task"})  # the OSWorld process cannot find its class
    with pytest.raises(OSWorldCodeError, match="V2 task no-such-task not found") as caught:
        score_v2(osworld, broken, tmp_path)
    assert translate(caught.value, "evaluator").classification == "configuration", "a task file that is missing"
