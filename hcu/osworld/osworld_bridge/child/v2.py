"""OSWorld-V2 task classes, inside the OSWorld process: found in `--tasks-dir` or the checkout's
`evaluation_examples/task_class/`, loaded with the checkout's own loader when it has one
(`desktop_env.task_loader.load_task_from_file`), set up with OSWorld's SetupController and scored by the
class's own `evaluate(env)` (a float in [0, 1], or a dict holding `score`).

Importing a task module runs its code: that happens here, never in hcu's process. What a task needs that this
run does not provide (mock websites, an LLM judge, a user simulator, GitLab) is named before any guest starts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

from hcu.osworld.osworld_bridge.child.v1 import Failure

TASK_CLASS_DIR = Path("evaluation_examples") / "task_class"
DOWNLOAD_HINT = ("download them with the checkout's scripts/tools/download_osworld_v2_tasks.py "
                 "(gated on Hugging Face: `hf auth login` first)")
NEEDS = (
    # (what the source mentions, the variable that provides it, how to name the need)
    (("WEBSITE_HOST_SUFFIX", "build_website_url"), "WEBSITE_HOST_SUFFIX", "the V2 mock websites"),
    (("GITLAB_URL",), "GITLAB_URL", "a self-hosted GitLab"),
    (("llm_metrics", "llm_judge", "OSWORLD_EVAL_MODEL"), "OSWORLD_EVAL_MODEL_API_KEY", "an LLM judge"),
)
FIELDS = ("id", "instruction", "config", "snapshot", "related_apps", "proxy", "volume_size", "instance_type")


def checkout_task_dir() -> Path:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise Failure("task", "desktop_env is not importable in this interpreter")
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent / TASK_CLASS_DIR


def find_task_file(task_id: str, tasks_dir: str | None) -> Path:
    name = task_id if task_id.startswith("task_") else f"task_{task_id}"
    if "/" in name or name.startswith("."):
        raise Failure("task", f"task_id: expected a V2 task id such as 001, got {task_id!r}")
    folders = ([Path(tasks_dir), Path(tasks_dir) / "task_class", Path(tasks_dir) / TASK_CLASS_DIR]
               if tasks_dir else [checkout_task_dir()])
    for folder in folders:
        if (folder / f"{name}.py").is_file():
            return folder / f"{name}.py"
    where = folders[0]
    if not where.is_dir():
        raise Failure("task", f"the gated V2 task classes are not in {where}; {DOWNLOAD_HINT}")
    raise Failure("task", f"V2 task {task_id} not found: {where / (name + '.py')} does not exist; {DOWNLOAD_HINT}")


def _base_task() -> type | None:
    try:
        return importlib.import_module("desktop_env.task_base").BaseTask
    except ImportError:
        return None


def _instantiate(module: Any) -> Any:
    """The V2 convention: `get_task()`, else `TASK_CLASS()`, else `Task()`, else the first task class."""
    if callable(getattr(module, "get_task", None)):
        return module.get_task()
    for attr in ("TASK_CLASS", "Task"):
        if isinstance(getattr(module, attr, None), type):
            return getattr(module, attr)()
    base = _base_task()
    for value in vars(module).values():
        own = isinstance(value, type) and value.__module__ == module.__name__
        if own and callable(getattr(value, "evaluate", None)) and (base is None or issubclass(value, base)):
            return value()
    raise Failure("task", f"{module.__file__} defines no task class (get_task, TASK_CLASS, Task)")


def load_task_object(path: Path) -> Any:
    """The task instance, through the checkout's `task_loader` when it has one."""
    try:
        loader = importlib.import_module("desktop_env.task_loader")
    except ImportError:
        loader = None
    try:
        if loader is not None and hasattr(loader, "load_task_from_file"):
            return loader.load_task_from_file(str(path))
        spec = importlib.util.spec_from_file_location(f"osworld_task_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return _instantiate(module)
    except Failure:
        raise
    except Exception as exc:
        need = _need_named_in(str(exc))
        if need:
            raise Failure("needs", f"V2 task {path.name} needs {need}, which this run does not provide") from None
        raise Failure("task", f"V2 task {path} could not be loaded: {type(exc).__name__}: {exc}") from None


def _need_named_in(text: str) -> str | None:
    for mentions, variable, need in NEEDS:
        if any(m in text for m in mentions):
            return f"{need} ({variable} unset)"
    return None


def _field(task: Any, name: str) -> Any:
    getter = getattr(task, "get", None)
    value = getter(name) if callable(getter) else None
    return value if value is not None else getattr(task, name, None)


def unmet_needs(task: Any, source: str) -> list[str]:
    needs = [f"{need} ({variable} unset)" for mentions, variable, need in NEEDS
             if any(m in source for m in mentions) and not os.environ.get(variable)]
    if _field(task, "user_simulator"):
        needs.append("a user simulator (hcu answers ASK_USER by ending the task)")
    if callable(getattr(task, "get_phases", None)):
        needs.append("several phases on one guest (hcu runs single-phase tasks)")
    return needs


def describe(path: Path, task: Any) -> dict[str, Any]:
    data = path.read_bytes()
    fields = {name: _json_safe(_field(task, name)) for name in FIELDS}
    if not isinstance(fields["instruction"], str) or not fields["instruction"]:
        raise Failure("task", f"V2 task {path}: no instruction")
    return {**fields, "config": fields["config"] or [], "source_path": str(path),
            "sha256": hashlib.sha256(data).hexdigest(), "needs": unmet_needs(task, data.decode(errors="replace"))}


def _json_safe(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _overrides(task: Any, method: str) -> bool:
    base = _base_task()
    own = getattr(type(task), method, None)
    return own is not None and (base is None or own is not getattr(base, method, None))


def run_setup(task: Any, env: Any) -> None:
    """The class's own `setup(setup_controller[, use_proxy])`, else its `config` through SetupController."""
    if _overrides(task, "setup"):
        parameters = inspect.signature(task.setup).parameters
        if "use_proxy" in parameters:
            task.setup(env.setup_controller, use_proxy=False)
        else:
            task.setup(env.setup_controller)
        return
    if env.setup_controller.setup(_field(task, "config") or [], use_proxy=False) is False:
        raise Failure("step_failed", "the guest API did not answer GET /terminal")


def run_evaluate(task: Any, env: Any, last_action: str | None) -> dict[str, Any]:
    """The class's own `evaluate(env)`: a score in [0, 1] (partial credit kept), or a dict with `score`."""
    env.action_history = [] if last_action is None else [last_action]
    outcome = task.evaluate(env)
    details = _json_safe(outcome) if isinstance(outcome, dict) else None
    raw = outcome.get("score") if isinstance(outcome, dict) else outcome
    try:
        score = float(raw)
    except (TypeError, ValueError):
        raise Failure("exception", f"evaluate() returned {raw!r}, not a score") from None
    if not 0.0 <= score <= 1.0:
        raise Failure("exception", f"evaluate() returned {score}, outside [0, 1]")
    return {"score": score, "task_result": details}


def prepare_env(env: Any, task: Any) -> None:
    """What `DesktopEnv._set_task_info` would have set from the task."""
    env.task_id = _field(task, "id")
    env.instruction = _field(task, "instruction")
    env.config = _field(task, "config") or []
    env.task_config = task
    env.evaluator = _field(task, "evaluator") or {}
