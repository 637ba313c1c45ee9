"""Task definitions: V1 task files and V2 task classes, from the OSWorld checkout, --tasks-dir or
$HCU_OSWORLD_TASKS_DIR (nothing else is searched).

V1 files are read here. V2 classes are Python code: they are imported only in the OSWorld process, which
describes them (instruction, steps, what they need); hcu's process never runs a task's code."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict

from hcu.defaults import BenchmarkVersion
from hcu.osworld.errors import PhaseError

TASKS_DIR_ENV = "HCU_OSWORLD_TASKS_DIR"
"""A V1 tasks folder (`examples/<domain>/<id>.json` inside) used instead of the checkout's."""


class TaskError(PhaseError):
    """A task id, domain or folder that does not lead to a valid task definition: a configuration error."""

    classification = "configuration"


class TaskDefinition(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    domain: str
    kind: Literal["v1_json", "v2_class"] = "v1_json"
    instruction: str
    config: list[dict[str, Any]]
    evaluator: dict[str, Any]
    raw: dict[str, Any]
    source_path: Path | None
    sha256: str
    """Of the task file's bytes, so a result says exactly which definition it was scored against."""

    tasks_dir: Path | None = None
    """For a V2 class: the folder it was found in (None: the checkout's task_class/)."""

    @property
    def proxy(self) -> bool:
        return bool(self.raw.get("proxy", False))

    def osworld_config(self) -> dict[str, Any]:
        """The task as OSWorld's `DesktopEnv` reads it."""
        return {"id": self.id, "instruction": self.instruction, "config": self.config, "evaluator": self.evaluator}

    def v2_ref(self) -> dict[str, Any]:
        """How the OSWorld process finds this V2 class again."""
        return {"task_id": self.id, "tasks_dir": None if self.tasks_dir is None else str(self.tasks_dir)}


def default_v1_tasks_dir(osworld_python: Path | None = None) -> Path:
    """`$HCU_OSWORLD_TASKS_DIR`, else the OSWorld checkout's `evaluation_examples`."""
    configured = os.environ.get(TASKS_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    from hcu.osworld.osworld_bridge.process import osworld_identity

    candidate = Path(osworld_identity(osworld_python)["checkout_root"]) / "evaluation_examples"
    if not (candidate / "examples").is_dir():
        raise TaskError(
            f"no V1 tasks folder: {candidate}/examples does not exist; "
            f"pass --tasks-dir or set {TASKS_DIR_ENV}"
        )
    return candidate


def _find_v1_file(tasks_dir: Path, task_id: str, task_domain: str | None) -> Path:
    examples = tasks_dir / "examples" if (tasks_dir / "examples").is_dir() else tasks_dir
    if not examples.is_dir():
        raise TaskError(f"tasks_dir: {tasks_dir} is not a folder of OSWorld task files")
    if "/" in task_id or task_id.startswith("."):
        raise TaskError(f"task_id: expected an OSWorld task id, got {task_id!r}")
    if task_domain is not None:
        path = examples / task_domain / f"{task_id}.json"
        if not path.is_file():
            raise TaskError(f"task {task_domain}/{task_id} not found: {path} does not exist")
        return path
    matches = sorted(examples.glob(f"*/{task_id}.json"))
    if not matches:
        raise TaskError(f"task {task_id} not found in any domain under {examples}")
    if len(matches) > 1:
        domains = ", ".join(p.parent.name for p in matches)
        raise TaskError(f"task {task_id} exists in several domains ({domains}); pass task_domain")
    return matches[0]


def _parse_v1(path: Path) -> TaskDefinition:
    data = path.read_bytes()
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TaskError(f"task file {path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise TaskError(f"task file {path}: expected a JSON object")
    for field, kind in (("id", str), ("instruction", str), ("evaluator", dict)):
        if not isinstance(raw.get(field), kind):
            raise TaskError(f"task file {path}: field {field!r} missing or not a {kind.__name__}")
    if raw["id"] != path.stem:
        raise TaskError(f"task file {path}: id {raw['id']!r} differs from the file name")
    config = raw.get("config", [])  # one official task has no config at all
    if not isinstance(config, list) or not all(isinstance(s, dict) and "type" in s for s in config):
        raise TaskError(f"task file {path}: 'config' must be a list of {{type, parameters}} steps")
    return TaskDefinition(
        id=raw["id"],
        domain=path.parent.name,
        instruction=raw["instruction"],
        config=config,
        evaluator=raw["evaluator"],
        raw=raw,
        source_path=path,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def _load_v2(task_id: str, tasks_dir: Path | None, osworld_python: Path | None) -> TaskDefinition:
    """A V2 task class, described by the OSWorld process; a class it cannot find or load, or a need this run
    cannot meet, is a one-line TaskError (other failures of that process are raised as they are)."""
    from hcu.osworld.osworld_bridge.process import OSWorldCodeError, describe_v2_task

    try:
        found = describe_v2_task(task_id, tasks_dir, osworld_python)
    except OSWorldCodeError as exc:
        if exc.kind != "task":
            raise
        raise TaskError(exc.detail) from None
    if found["needs"]:
        raise TaskError(f"V2 task {task_id} needs {', '.join(found['needs'])}, which this run does not provide")
    return TaskDefinition(
        id=task_id, domain="tasks", kind="v2_class", instruction=found["instruction"], config=found["config"],
        evaluator={}, raw=found, source_path=Path(found["source_path"]), sha256=found["sha256"],
        tasks_dir=tasks_dir,
    )


def load_task(
    benchmark_version: BenchmarkVersion,
    task_id: str,
    task_domain: str | None = None,
    tasks_dir: Path | None = None,
    osworld_python: Path | None = None,
) -> TaskDefinition:
    """Load one task definition. Every failure is a one-line `TaskError`. `osworld_python` is asked only for
    a V2 class, or for the checkout's tasks folder when no folder is given."""
    if benchmark_version == "v2":
        return _load_v2(task_id, tasks_dir, osworld_python)
    if benchmark_version != "v1":
        raise TaskError(f"benchmark_version: expected 'v1' or 'v2', got {benchmark_version!r}")
    folder = Path(tasks_dir) if tasks_dir is not None else default_v1_tasks_dir(osworld_python)
    return _parse_v1(_find_v1_file(folder, task_id, task_domain))
