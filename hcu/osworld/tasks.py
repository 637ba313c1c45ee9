"""Task definitions: V1 task files and V2 task classes, from the OSWorld checkout, --tasks-dir or
$HCU_OSWORLD_TASKS_DIR (nothing else is searched)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from hcu.osworld.defaults import BenchmarkVersion
from hcu.osworld.errors import PhaseError

TASKS_DIR_ENV = "HCU_OSWORLD_TASKS_DIR"
"""A V1 tasks folder (`examples/<domain>/<id>.json` inside) used instead of the checkout's."""

V2_TASKS_SUBDIR = Path("evaluation_examples") / "task_class"
"""Where the checkout's download script writes the V2 task classes (`task_<id>.py`)."""
V2_DOWNLOAD_HINT = (
    "download the V2 task classes with the checkout's scripts/tools/download_osworld_v2_tasks.py "
    "(after `hf auth login`)"
)


class TaskError(PhaseError):
    """A task id, domain or folder that does not lead to a valid task definition."""


class TaskDefinition(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    domain: str
    instruction: str
    config: list[dict[str, Any]]
    evaluator: dict[str, Any]
    raw: dict[str, Any]
    source_path: Path | None
    sha256: str
    """Of the task file's bytes, so a result says exactly which definition it was scored against."""

    @property
    def proxy(self) -> bool:
        return bool(self.raw.get("proxy", False))


def default_v1_tasks_dir() -> Path:
    """`$HCU_OSWORLD_TASKS_DIR`, else the OSWorld checkout's `evaluation_examples`."""
    configured = os.environ.get(TASKS_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    from hcu.osworld.osworld_bridge.code import checkout_root

    candidate = checkout_root() / "evaluation_examples"
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


def _load_v2(task_id: str) -> TaskDefinition:
    """V2 tasks are Python classes the checkout downloads itself; the runner never fetches them."""
    from hcu.osworld.osworld_bridge.code import checkout_root

    tasks_root = checkout_root() / V2_TASKS_SUBDIR
    if not tasks_root.is_dir():
        raise TaskError(f"V2 task classes are not in {tasks_root}; {V2_DOWNLOAD_HINT}")
    name = task_id if task_id.startswith("task_") else f"task_{task_id}"
    path = tasks_root / f"{name}.py"
    if "/" in task_id or not path.is_file():
        raise TaskError(f"V2 task {task_id} not found: {path} does not exist; {V2_DOWNLOAD_HINT}")
    raise TaskError(
        f"V2 task {task_id} ({path}) is a task class; hcu's setup and evaluator path runs V1 task files only"
    )


def load_task(
    benchmark_version: BenchmarkVersion,
    task_id: str,
    task_domain: str | None = None,
    tasks_dir: Path | None = None,
) -> TaskDefinition:
    """Load one task definition. Every failure is a one-line `TaskError`."""
    if benchmark_version == "v2":
        return _load_v2(task_id)
    if benchmark_version != "v1":
        raise TaskError(f"benchmark_version: expected 'v1' or 'v2', got {benchmark_version!r}")
    folder = Path(tasks_dir) if tasks_dir is not None else default_v1_tasks_dir()
    return _parse_v1(_find_v1_file(folder, task_id, task_domain))
