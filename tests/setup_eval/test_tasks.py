"""Task loading (V1 files, V2 lookup) and per-version defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hcu.osworld.osworld_bridge.tasks import TaskError, load_task

from .conftest import write_task

TASK_ID = "e0df059f-28a6-4169-924f-b9623e7184cc"


def test_v1_task_loads_with_or_without_its_domain(official_tasks: Path) -> None:
    by_domain = load_task("v1", TASK_ID, "os", tasks_dir=official_tasks)
    searched = load_task("v1", TASK_ID, tasks_dir=official_tasks)
    assert by_domain == searched
    assert by_domain.domain == "os" and by_domain.id == TASK_ID
    assert by_domain.config[0]["type"] == "execute"
    assert by_domain.evaluator["func"] == "exact_match"
    assert len(by_domain.sha256) == 64
    assert by_domain.source_path == official_tasks / "examples" / "os" / f"{TASK_ID}.json"


def test_v1_task_folder_may_be_the_examples_folder_itself(official_tasks: Path) -> None:
    assert load_task("v1", TASK_ID, tasks_dir=official_tasks / "examples").id == TASK_ID


def test_tasks_dir_defaults_to_the_environment(official_tasks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCU_OSWORLD_TASKS_DIR", str(official_tasks))
    assert load_task("v1", TASK_ID).id == TASK_ID


@pytest.mark.parametrize(
    ("task_id", "domain", "expected"),
    [
        ("no-such-task", None, "not found in any domain"),
        (TASK_ID, "chrome", "chrome/" + TASK_ID + " not found"),
        ("../os/" + TASK_ID, None, "task_id: expected an OSWorld task id"),
    ],
)
def test_unknown_tasks_fail_with_one_line(
    official_tasks: Path, task_id: str, domain: str | None, expected: str
) -> None:
    with pytest.raises(TaskError, match=expected) as caught:
        load_task("v1", task_id, domain, tasks_dir=official_tasks)
    assert "\n" not in str(caught.value)


def test_malformed_task_files_name_the_file_and_field(tmp_path: Path) -> None:
    path = write_task(tmp_path, "os", {"id": "t1", "instruction": "x"})
    with pytest.raises(TaskError, match="'evaluator' missing"):
        load_task("v1", "t1", tasks_dir=tmp_path)
    path.write_text("{not json")
    with pytest.raises(TaskError, match=f"{path} is not valid JSON"):
        load_task("v1", "t1", tasks_dir=tmp_path)


def test_a_task_without_config_has_no_setup_steps(tmp_path: Path) -> None:
    write_task(tmp_path, "os", {"id": "t2", "instruction": "x", "evaluator": {"func": "infeasible"}})
    assert load_task("v1", "t2", tasks_dir=tmp_path).config == []


V2_TASKS = Path(__file__).resolve().parent / "v2_tasks"


def test_a_v2_task_class_is_described_by_the_osworld_process(evaluator_python: Path) -> None:
    task = load_task("v2", "901", tasks_dir=V2_TASKS, osworld_python=evaluator_python)
    assert (task.kind, task.id, task.domain) == ("v2_class", "901", "tasks")
    assert task.instruction.startswith("Create the text file ~/Desktop/notes.txt")
    assert task.source_path == V2_TASKS / "task_901.py" and len(task.sha256) == 64
    assert not [name for name in sys.modules if "task_901" in name], "hcu's process imported the task's code"


def test_what_a_v2_task_needs_and_this_run_lacks_is_named_before_any_guest(
    evaluator_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WEBSITE_HOST_SUFFIX", raising=False)
    with pytest.raises(TaskError) as caught:
        load_task("v2", "904", tasks_dir=V2_TASKS, osworld_python=evaluator_python)
    assert str(caught.value) == (
        "V2 task 904 needs the V2 mock websites (WEBSITE_HOST_SUFFIX unset), which this run does not provide"
    )


def test_v2_task_classes_are_looked_up_in_the_checkout_and_never_fetched(
    desktop_env_checkout: Path, evaluator_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSWORLD_V2_ROOT", str(desktop_env_checkout))  # the OSWorld process imports it from there
    gated = "the gated V2 task classes are not in .*download_osworld_v2_tasks.py"
    with pytest.raises(TaskError, match=gated) as caught:
        load_task("v2", "001", osworld_python=evaluator_python)
    assert "\n" not in str(caught.value) and str(desktop_env_checkout) in str(caught.value)
    task_class = desktop_env_checkout / "evaluation_examples" / "task_class"
    task_class.mkdir(parents=True)
    with pytest.raises(TaskError, match="task_class/task_001.py does not exist"):
        load_task("v2", "001", osworld_python=evaluator_python)
    (task_class / "task_001.py").write_bytes((V2_TASKS / "task_901.py").read_bytes())
    assert load_task("v2", "001", osworld_python=evaluator_python).source_path == task_class / "task_001.py"
