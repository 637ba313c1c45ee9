"""Scoring with OSWorld's own code, in the OSWorld process, over our guest.

V1: the evaluator's postconfig runs step by step through OSWorld's SetupController (recorded like setup), then
`DesktopEnv.evaluate` scores the state (child/v1.py): OSWorld's own metric lookup, `infeasible` rule, `conj`
and averaging. V2: the task class's own `evaluate(env)`; partial credit is kept as the raw score. Files a
`cloud_file` getter would download come from the asset source. Anything that fails raises (the runner makes it
an evaluator failure, or a configuration one where the table says so), never a zero.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hcu.defaults import SETUP
from hcu.osworld.errors import EvaluatorError
from hcu.osworld.osworld_bridge.assets import AssetCache, is_url
from hcu.osworld.osworld_bridge.process import OSWorldProcess
from hcu.osworld.osworld_bridge.setup import place, run_steps
from hcu.osworld.osworld_bridge.tasks import TaskDefinition
from hcu.osworld.records.result import EmptyGetter

DEFAULT_DEADLINE_SEC = 600.0


class EvalResult(BaseModel):
    score: float
    """What OSWorld's evaluator said: 0/1 for most V1 tasks, a partial credit in [0, 1] for V2 classes."""
    metric: str | list[str]
    details: dict[str, Any]
    getters_read_nothing: list[EmptyGetter] = []
    """Getters that returned None, raised FileNotFoundError, met a guest answer that was not a success or
    logged an error: the score stands (it is OSWorld's), but nothing of the state was read by them."""


def _getter_configs(evaluator: dict[str, Any]) -> list[dict[str, Any]]:
    configs: list[Any] = []
    for key in ("result", "expected"):
        value = evaluator.get(key)
        configs += value if isinstance(value, list) else [value]
    return [c for c in configs if isinstance(c, dict)]


def evaluator_names(evaluator: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(metric names, getter function names) an evaluator makes `DesktopEnv` look up."""
    funcs = evaluator.get("func")
    metrics = list(funcs) if isinstance(funcs, list) else [funcs] if funcs else []
    getters = [f"get_{config['type']}" for config in _getter_configs(evaluator) if config.get("type")]
    return metrics, getters


def ensure_evaluator_loads(process: OSWorldProcess, task: TaskDefinition) -> None:
    """Fail now, with the missing function named, when OSWorld's code lacks a metric or getter the task names
    (`DesktopEnv.reset` resolves them before setup too): such a task is never scored, so nothing is spent on it."""
    if task.kind != "v1_json":
        return
    metrics, getters = evaluator_names(task.evaluator)
    found = process.call("check_names", {"metrics": metrics, "getters": getters},
                         deadline_sec=DEFAULT_DEADLINE_SEC, what="loading the evaluator")
    if found["import_error"]:
        raise EvaluatorError(f"task {task.id}: OSWorld's evaluators do not import: {found['import_error']}")
    if found["missing"]:
        raise EvaluatorError(f"task {task.id}: {'; '.join(found['missing'].values())}")


def prefill_cloud_files(evaluator: dict[str, Any], cache_dir: Path, assets: AssetCache) -> None:
    """`cloud_file` downloads to `<task cache>/<dest>` unless the file is there: fill it from the asset cache."""
    for config in _getter_configs(evaluator):
        if config.get("type") != "cloud_file":
            continue
        paths = config["path"] if config.get("multi") else [config["path"]]
        dests = config["dest"] if config.get("multi") else [config["dest"]]
        for url, dest in zip(paths, dests, strict=False):
            if is_url(url):
                place(assets.resolve(url), cache_dir / dest)


def evaluate(
    process: OSWorldProcess,
    task: TaskDefinition,
    *,
    agent_last_action: str | None,
    password: str,
    cache_dir: Path,
    assets: AssetCache,
    deadline_sec: float = DEFAULT_DEADLINE_SEC,
    step_deadline_sec: float = SETUP.step_timeout_sec,
) -> EvalResult:
    """Score the guest's current state (`deadline_sec` 0 = none). Raises on any failure (never returns a false
    0): OSWorld's process and the postconfig steps raise their own errors, for the runner to classify."""
    started = time.monotonic()
    details: dict[str, Any] = {"agent_last_action": agent_last_action}
    assets.prepare(task)
    if task.kind == "v2_class":
        metric: str | list[str] = "task_class.evaluate"
        answer = process.call("v2_evaluate", {**task.v2_ref(), "last_action": agent_last_action},
                              deadline_sec=deadline_sec, what="evaluator")
    else:
        metric = task.evaluator.get("func") or ""
        if not metric:
            raise EvaluatorError(f"task {task.id}: evaluator has no 'func'")
        answer = _evaluate_v1(process, task, agent_last_action, password, cache_dir, assets, deadline_sec,
                              step_deadline_sec, details)
    empty = answer.pop("getters_read_nothing", [])
    details.update(answer)
    details["duration_sec"] = round(time.monotonic() - started, 3)
    return EvalResult(score=answer["score"], metric=metric, details=details, getters_read_nothing=empty)


def _evaluate_v1(process: OSWorldProcess, task: TaskDefinition, last_action: str | None, password: str,
                 cache_dir: Path, assets: AssetCache, deadline_sec: float, step_deadline_sec: float,
                 details: dict[str, Any]) -> Any:
    started = time.monotonic()
    evaluator = task.evaluator
    ensure_evaluator_loads(process, task)
    if deadline_sec > 0:
        step_deadline_sec = min(step_deadline_sec, deadline_sec)
    details["postconfig"] = [r.model_dump(mode="json") for r in run_steps(
        process, evaluator.get("postconfig", []), password=password, cache_dir=cache_dir, assets=assets,
        step_deadline_sec=step_deadline_sec, what="postconfig step")]
    prefill_cloud_files(evaluator, cache_dir, assets)
    remaining = max(deadline_sec - (time.monotonic() - started), 1.0) if deadline_sec > 0 else 0.0  # 0 = none
    return process.call("evaluate", {"task": task.osworld_config(), "last_action": last_action},
                        deadline_sec=remaining, what="evaluator")
