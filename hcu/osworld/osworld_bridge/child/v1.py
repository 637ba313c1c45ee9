"""OSWorld's own setup and evaluation over one hcu guest, inside the OSWorld process.

The environment object is OSWorld's `DesktopEnv`, created without its constructor (which would start a VM
provider of its own) and given what its constructor would have set for a Docker guest: the controllers
pointed at the guest's published ports, the cache folder, the password, the action history. Evaluation then
runs `DesktopEnv._set_evaluator_info` and `DesktopEnv.evaluate` unchanged, so metric lookup, `infeasible`,
the trailing "FAIL", `FileNotFoundError`, `conj` and/or and the averaging are OSWorld's code, not a copy.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.osworld_bridge.child.getter_state import read_nothing, wrap_getters
from hcu.osworld.osworld_bridge.child.guest_traffic import PROBE, Watch, failures

SCREEN_WIDTH, SCREEN_HEIGHT = 1920, 1080
"""OSWorld's guest screen; it only feeds the `{SCREEN_*}` setup placeholders."""
AGENT_FAIL = "FAIL"

NEWER_THAN_PYPI = {
    "check_play_and_exit": "metric",
    "check_structure_sim_with_threshold": "metric",
    "get_chrome_appearance_mode_ui": "getter",
}
"""Functions official task files name that desktop-env 1.0.2, the newest PyPI release, lacks."""
NEWER_OSWORLD = "OSWorld newer than desktop-env 1.0.2 (xlang-ai/OSWorld main)"


class Failure(HcuOSWorldError):
    """A failure the OSWorld process reports with its kind (see protocol.ERROR_KINDS)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class GuestContext:
    host: str
    api: int
    cdp: int
    vnc: int
    vlc: int
    cache_dir: str
    client_password: str


def desktop_env_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("desktop-env")
    except metadata.PackageNotFoundError:
        return "a checkout"


def missing_function_message(name: str, what: str) -> str:
    if name in NEWER_THAN_PYPI:
        return (f"{NEWER_THAN_PYPI[name]} {name!r} is not in desktop-env {desktop_env_version()}; "
                f"{NEWER_OSWORLD} has it (point osworld_python at such a checkout's interpreter)")
    return f"{what} {name!r} is not in desktop_env {desktop_env_version()} (a newer OSWorld may have it)"


def build_env(ctx: GuestContext) -> Any:
    """A `DesktopEnv` over the guest, with the attributes its getters and `evaluate` read."""
    from desktop_env.controllers.python import PythonController
    from desktop_env.controllers.setup import SetupController
    from desktop_env.desktop_env import DesktopEnv

    env = DesktopEnv.__new__(DesktopEnv)
    env.provider_name, env.region, env.os_type, env.action_space = "docker", None, "Ubuntu", "pyautogui"
    env.enable_proxy = env.current_use_proxy = False
    env.client_password = ctx.client_password
    env.screen_width, env.screen_height = SCREEN_WIDTH, SCREEN_HEIGHT
    env.vm_ip = ctx.host
    env.server_port, env.chromium_port, env.vnc_port, env.vlc_port = ctx.api, ctx.cdp, ctx.vnc, ctx.vlc
    env.cache_dir_base = env.cache_dir = ctx.cache_dir
    env.is_environment_used = True
    env.require_a11y_tree = env.require_terminal = False
    env.action_history, env.instruction, env.config = [], None, []
    env._traj_no, env._step_no = 0, 0
    env.controller = PythonController(vm_ip=ctx.host, server_port=ctx.api)
    env.setup_controller = SetupController(
        vm_ip=ctx.host, server_port=ctx.api, chromium_port=ctx.cdp, vlc_port=ctx.vlc, cache_dir=ctx.cache_dir,
        client_password=ctx.client_password, screen_width=SCREEN_WIDTH, screen_height=SCREEN_HEIGHT,
    )
    return env


def run_setup_step(env: Any, step: dict[str, Any], watch: Watch) -> list[dict[str, Any]]:
    """One step through OSWorld's `SetupController.setup`, which raises on a failed step and returns False
    only when the guest never answered its probe. A guest answer that is not a success fails the step even
    where OSWorld only logs it. Returns the step's exchanges with the guest."""
    mark = watch.mark()
    with watch.on():
        answered = env.setup_controller.setup([step], use_proxy=False)
    if answered is False:
        raise Failure("step_failed", "the guest API did not answer GET /terminal")
    exchanges = watch.since(mark)
    failed = failures(exchanges, skip_probe=True)
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise Failure("step_failed", f"the guest answered {failed[0].line()}{more}")
    return [e.record() for e in exchanges if (e.method, e.path) != PROBE]


class _Recorded:
    """Wraps one of the env's resolved metrics to keep what it returned (the function itself is OSWorld's and
    runs unchanged)."""

    def __init__(self, fn: Any, sink: list[Any]) -> None:
        self.fn, self.sink = fn, sink

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        value = self.fn(*args, **kwargs)
        self.sink.append(_number(value))
        return value


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _wrap_metrics(resolved: Any, sink: list[Any]) -> Any:
    if isinstance(resolved, list):
        return [_wrap_metrics(fn, sink) for fn in resolved]
    return None if resolved is None else _Recorded(resolved, sink)


def set_evaluator(env: Any, task: dict[str, Any]) -> None:
    """`DesktopEnv._set_evaluator_info`: resolves every metric and getter by name; a missing one is named."""
    from desktop_env.desktop_env import DesktopEnv

    try:
        DesktopEnv._set_evaluator_info(env, task)
    except AttributeError as exc:
        name = getattr(exc, "name", None) or str(exc).rsplit("'", 2)[-2]
        raise Failure("missing_function", missing_function_message(name, "metric or getter")) from None


def evaluate(env: Any, task: dict[str, Any], last_action: str | None, watch: Watch) -> dict[str, Any]:
    """Score the guest's state with `DesktopEnv.evaluate`. Postconfig has already run, step by step, through
    the same SetupController (hcu records each step), so it is left out of the evaluator here. Names every
    getter that read nothing of the guest's state (child/getter_state.py)."""
    from desktop_env.desktop_env import DesktopEnv

    evaluator = {k: v for k, v in task["evaluator"].items() if k != "postconfig"}
    set_evaluator(env, {**task, "evaluator": evaluator})
    env.action_history = [] if last_action is None else [last_action]
    metric_values: list[Any] = []
    getter_calls: list[dict[str, Any]] = []
    env.metric = _wrap_metrics(env.metric, metric_values)
    env.result_getter = wrap_getters(env.result_getter, watch, getter_calls)
    env.expected_getter = wrap_getters(env.expected_getter, watch, getter_calls)
    try:
        with watch.on():
            score = float(DesktopEnv.evaluate(env))
    except Exception as exc:  # noqa: BLE001 - a metric that raised on what a getter failed to read says so
        empty = read_nothing(getter_calls)
        if not empty:
            raise
        reasons = "; ".join(f"{g['getter']}: {g['reason']}" for g in empty)
        raise Failure("exception", f"{type(exc).__name__}: {exc} (after a getter read nothing: {reasons})") from None
    return {
        "score": score,
        "metric_values": metric_values,
        "getters_read_nothing": read_nothing(getter_calls),
        "scored_by": _scored_by(evaluator, last_action),
    }


def _scored_by(evaluator: dict[str, Any], last_action: str | None) -> str:
    if evaluator.get("func") == "infeasible":
        return "infeasible: 1 iff the agent's last action is FAIL"
    if last_action == AGENT_FAIL:
        return "agent reported the task infeasible on a feasible task"
    return "metrics"


def check_names(metric_names: list[str], getter_names: list[str]) -> dict[str, Any]:
    """Load OSWorld's metric and getter packages the way `DesktopEnv` does (whole packages) and look each
    name up: {"missing": {name: message}, "import_error": message or None}."""
    found = {"missing": {}, "import_error": None, "package": None, "python": sys.executable,
             "missing_modules": missing_modules()}
    try:
        evaluators = importlib.import_module("desktop_env.evaluators")
        metrics = importlib.import_module("desktop_env.evaluators.metrics")
        getters = importlib.import_module("desktop_env.evaluators.getters")
    except ImportError as exc:
        return {**found, "import_error": f"{type(exc).__name__}: {exc}"}
    for names, package, what in ((metric_names, metrics, "metric"), (getter_names, getters, "getter")):
        for name in names:
            if not hasattr(package, name):
                found["missing"][name] = missing_function_message(name, what)
    return {**found, "package": str(Path(evaluators.__file__).parent)}


def missing_modules() -> list[str]:
    """Top-level modules that desktop_env's controllers and evaluators import and this interpreter lacks."""
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        return ["desktop_env"]
    package = Path(next(iter(spec.submodule_search_locations)))
    wanted: set[str] = set()
    for folder in ("controllers", "evaluators", "evaluators/metrics", "evaluators/getters"):
        for source in (package / folder).glob("*.py"):
            for node in ast.parse(source.read_bytes()).body:
                if isinstance(node, ast.Import):
                    wanted.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    wanted.add(node.module.split(".")[0])
    return sorted(name for name in wanted - {"desktop_env"} if importlib.util.find_spec(name) is None)
