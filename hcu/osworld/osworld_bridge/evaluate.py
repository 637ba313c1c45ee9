"""Scoring with OSWorld's own postconfig, getters and metrics, over our guest.

The getters take an `env`; `OSWorldEnv` gives them the attributes of `DesktopEnv` they read (controller,
vm_ip, ports, cache_dir, ...) without constructing `DesktopEnv`, which would start its own Docker provider.
The aggregation follows `DesktopEnv.evaluate` of desktop-env 1.0.2: `infeasible` scores 1 iff the agent's
last action is "FAIL"; otherwise a trailing "FAIL" scores 0; a getter's `FileNotFoundError` scores 0;
`and` stops at the first 0 and averages, `or` stops at the first 1 and takes the max. Anything else that
raises is an `EvaluatorError`, never a zero.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hcu.osworld.errors import EvaluatorError
from hcu.osworld.osworld_bridge import code as osworld_code
from hcu.osworld.osworld_bridge.assets import AssetCache, is_url
from hcu.osworld.osworld_bridge.setup import (
    GuestLike,
    SetupStepError,
    mask,
    one_line,
    place,
    run_steps,
    setup_controller,
    task_cache_dir,
)
from hcu.osworld.tasks import TaskDefinition

INFEASIBLE = "infeasible"
AGENT_FAIL = "FAIL"


class EvalResult(BaseModel):
    score: float
    metric: str | list[str]
    details: dict[str, Any]


class OSWorldEnv:
    """The parts of `DesktopEnv` OSWorld's getters read, over one of our guests."""

    def __init__(self, guest: GuestLike, cache_dir: Path) -> None:
        self.vm_ip = guest.host
        self.server_port = guest.ports.api
        self.chromium_port = guest.ports.cdp
        self.vlc_port = guest.ports.vlc
        self.cache_dir = str(cache_dir)
        self.current_use_proxy = False
        self.enable_proxy = False
        python = osworld_code.module("controllers.python")
        self.controller = python.PythonController(vm_ip=guest.host, server_port=guest.ports.api)
        self.setup_controller = setup_controller(guest, cache_dir)

    @property
    def vm_platform(self) -> str:
        return self.controller.get_vm_platform()

    @property
    def vm_screen_size(self) -> Any:
        return self.controller.get_vm_screen_size()


def _as_list(value: Any, n: int) -> list[Any]:
    return list(value) if isinstance(value, list) else [value] * n


def _plan(evaluator: dict[str, Any]) -> tuple[list[str], list[Any], list[Any], list[dict[str, Any]]]:
    """(metrics, result configs, expected configs, options), one entry per metric, as `DesktopEnv` reads
    them; an unequal list length is a malformed task."""
    funcs = evaluator["func"]
    names = list(funcs) if isinstance(funcs, list) else [funcs]
    n = len(names)
    results = _as_list(evaluator.get("result") or None, n)
    expected = _as_list(evaluator.get("expected") or None, n)
    options = [o or {} for o in _as_list(evaluator.get("options") or None, n)]
    if not (len(results) == len(expected) == len(options) == n):
        raise EvaluatorError(f"evaluator: func, result, expected and options must have {n} entries each")
    return names, results, expected, options


def _prefill_cloud_file(config: dict[str, Any], cache_dir: Path, assets: AssetCache) -> None:
    """`cloud_file` downloads to `cache_dir/<dest>` unless the file is there: fill it from the asset cache."""
    paths = config["path"] if config.get("multi") else [config["path"]]
    dests = config["dest"] if config.get("multi") else [config["dest"]]
    for url, dest in zip(paths, dests, strict=False):
        if is_url(url):
            place(assets.resolve(url), cache_dir / dest)


def _state(env: OSWorldEnv, config: Any, assets: AssetCache) -> Any:
    if not config:
        return None
    if config.get("type") == "cloud_file":
        _prefill_cloud_file(config, Path(env.cache_dir), assets)
    return osworld_code.getter(config["type"])(env, config)


def _score(env: OSWorldEnv, evaluator: dict[str, Any], assets: AssetCache, details: dict[str, Any]) -> float:
    names, results, expected, options = _plan(evaluator)
    conj = evaluator.get("conj", "and")
    values: list[float] = []
    for name, result_cfg, expected_cfg, opts in zip(names, results, expected, options, strict=True):
        fn = osworld_code.metric(name)
        try:
            result_state = _state(env, result_cfg, assets)
        except FileNotFoundError as exc:
            details.setdefault("file_not_found", []).append(str(exc))
            if conj == "and" or len(names) == 1:
                return 0.0
            continue  # DesktopEnv leaves a stale state here; we score this metric from nothing instead
        args = [result_state] if expected_cfg is None else [result_state, _state(env, expected_cfg, assets)]
        value = float(fn(*args, **opts))
        values.append(value)
        if conj == "and" and value == 0.0:
            break
        if conj == "or" and value == 1.0:
            break
    details["metric_values"] = values
    if not values:
        return 0.0
    if conj == "and":
        return 0.0 if values[-1] == 0.0 else sum(values) / len(values)
    return max(values)


def evaluate(
    guest: GuestLike,
    task: TaskDefinition,
    *,
    agent_last_action: str | None,
    osworld_cache_dir: Path,
    deadline_sec: float = 600,
    asset_cache: Path | None = None,
    offline_assets: bool = False,
) -> EvalResult:
    """Score the guest's current state. Raises `EvaluatorError` on any failure (never returns a false 0)."""
    evaluator = task.evaluator
    func = evaluator.get("func")
    if not func:
        raise EvaluatorError(f"task {task.id}: evaluator has no 'func'")
    started = time.monotonic()
    password = guest.spec.client_password
    details: dict[str, Any] = {"agent_last_action": agent_last_action}
    try:
        cache_dir = task_cache_dir(osworld_cache_dir, task)
        assets = AssetCache.configured(asset_cache, offline=offline_assets)
        offline_host = guest.host if offline_assets else None
        env = OSWorldEnv(guest, cache_dir)
        postconfig = evaluator.get("postconfig", [])
        details["postconfig"] = [
            r.model_dump(mode="json")
            for r in run_steps(
                env.setup_controller, postconfig, password=password, cache_dir=cache_dir, assets=assets,
                step_deadline_sec=deadline_sec, what="postconfig step", offline_host=offline_host,
            )
        ]
        if func == INFEASIBLE:
            score = 1.0 if agent_last_action == AGENT_FAIL else 0.0
        elif agent_last_action == AGENT_FAIL:
            score = 0.0
            details["scored_by"] = "agent reported the task infeasible on a feasible task"
        else:
            remaining = deadline_sec - (time.monotonic() - started)
            with osworld_code.offline(offline_host):
                score = osworld_code.call_with_deadline(
                    lambda: _score(env, evaluator, assets, details), max(remaining, 1.0), "evaluator"
                )
    except EvaluatorError:
        raise
    except SetupStepError as exc:
        raise EvaluatorError(f"task {task.id}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - every evaluator failure is an EvaluatorError, not a score
        message = one_line(mask(f"task {task.id}: {type(exc).__name__}: {exc}", password))
        raise EvaluatorError(message) from None
    details["duration_sec"] = round(time.monotonic() - started, 3)
    return EvalResult(score=score, metric=func, details=details)
