"""The --dry-run report of run_queue: resolved paths, the gateway flags, the executor, repeats and cost, what
would launch, and the campaign forecast (queue/forecasting.py); in words, or as one JSON object. Reads the run
directory; writes nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hcu.osworld.agents import agent_cli
from hcu.osworld.queue.admission import AutoAdmission
from hcu.osworld.queue.forecasting import Upstreams, finished_profile, known_upstreams, plan_forecast
from hcu.osworld.queue.launch import RUN_TASK, runner_args
from hcu.osworld.queue.order import LaunchQueue, expected_durations
from hcu.osworld.queue.panel import config_difference
from hcu.osworld.queue.spend import SpendMeter, usd
from hcu.osworld.queue.state import scan_task
from hcu.osworld.quota.forecast import Forecast
from hcu.osworld.quota.profile import AttemptProfile
from hcu.osworld.quota.report import plan_lines
from hcu.osworld.records.identity import repeat_key, split_repeat_key
from hcu.osworld.run_config import AUTO, RunConfig
from hcu.osworld.settings import gateway_options

FINAL_STATES = frozenset({"finished", "exhausted"})


def executor_plan(config: RunConfig) -> list[str]:
    if config.ray is None:
        return ["executor: local (this host's Docker engine)"]
    lines = [f"executor: ray (cluster {config.ray.address}, namespace {config.ray.namespace}, one "
             f"{config.ray.slot_resource} per attempt; results back through "
             f"{config.ray.shared_dir or 'Ray'})"]
    if config.ray.node_gateway is not None:
        from hcu.osworld.queue.node_gateway import gateway_command, token_variable  # no Ray needed to describe it

        token_env = config.ray.node_gateway.upstream_token_env
        key = Path("<node copy of the scope key>") if config.scope_key_file else None
        argv = gateway_command(config, "<node bridge>", 0, Path("<node token log>"), key)
        argv[argv.index(agent_cli(config.agent).provider.port_flag) + 1] = "<free port>"
        env = f" (in its environment: {token_variable(config)}=${token_env})" if token_env else ""
        lines.append("gateway: each node starts " + " ".join(argv[1:]) + env)
    if config.scope_key_file is not None:
        lines.append(f"scope key: {config.scope_key_file}, shipped to every node "
                     f"({'in the shared directory' if config.ray.shared_dir else 'through Ray'})")
    return lines


@dataclass(frozen=True)
class Launch:
    """One repeat of a task as the dry run shows it."""

    key: str
    domain: str | None
    state: str
    attempt: int
    expected_sec: float | None
    learned: AttemptProfile | None = None
    """What its attempt in tasks/ used, when it ended (the forecast learns from it)."""

    def shown(self) -> dict[str, Any]:
        return {"key": self.key, "domain": self.domain, "state": self.state, "attempt": self.attempt,
                "expected_sec": self.expected_sec}


def launches(config: RunConfig) -> list[Launch]:
    """Every repeat of every task in launch order, with its state and the attempt that would run."""
    expected = expected_durations(config)
    specs = {task.id: task for task in config.tasks}
    units = [(task.id, repeat) for task in config.tasks for repeat in range(1, config.repeats_of(task) + 1)]
    order = LaunchQueue(units, expected)
    for task_id, repeat in units:
        order.push(repeat_key(task_id, repeat))
    found = []
    for key in (order.pop() for _ in units):
        task_id, repeat = split_repeat_key(key)
        view, domain = scan_task(config.run_dir, task_id, repeat), config.domain_of(specs[task_id])
        found.append(Launch(key, domain, view.state, view.attempt, expected.get(task_id),
                            finished_profile(config, view, domain)))
    return found


def forecast_of(config: RunConfig, planned: list[Launch], upstreams: Upstreams) -> Forecast:
    done = sum(launch.state in FINAL_STATES for launch in planned)
    own = [launch.learned for launch in planned if launch.learned is not None]
    return plan_forecast(config, len(planned) - done, done, upstreams, own)


def admission_of(config: RunConfig, forecast: Forecast) -> dict[str, Any] | None:
    """Under "max_active_tasks": "auto", the limit the run would start at and why (None: a fixed number)."""
    if config.max_active_tasks != AUTO:
        return None
    change = AutoAdmission(config, lambda: None).begin(forecast.safe_concurrency, time.time()).change
    return {"start": change.limit, "signal": change.signal, "reason": change.reason,
            "ceiling": config.active_ceiling}


def config_state(config: RunConfig) -> str:
    changed = config_difference(config)
    return ("new run" if changed is None else "matches the stored config.json (resume)" if not changed else
            f"REFUSED, {', '.join(changed)} differ from the stored config.json")


def describe_plan(config: RunConfig, upstreams: Upstreams | None = None) -> str:
    """The --dry-run report: resolved paths, the gateway flags, what would launch and the forecast. Writes
    nothing; `upstreams`: the gateway's, when the caller has asked for them already."""
    lines = [f"run directory: {config.run_dir}", f"config: {config_state(config)}"]
    if not config.node_gateways:
        assert config.gateway is not None and config.token_log is not None
        options = gateway_options(host=str(urlsplit(config.gateway).hostname), token_log=config.token_log,
                                  max_model_calls=config.max_model_calls, scope_key_file=config.scope_key_file)
        lines += [f"gateway: {config.gateway}", "gateway flags: " + " ".join(options.argv())
                  + (" (--max-requests-per-task 0 = no budget)" if config.max_model_calls == 0 else "")]
    for key in ("guest_image", "test_desktop", "tasks_dir", "results_dir", "token_log", "artifact_dir",
                "asset_cache", "agent_binary", "mcp_binary", "instructions_file", "base_instructions_file"):
        value = getattr(config, key)
        checked = key not in ("test_desktop", "results_dir", "token_log") and value not in (None, "")
        missing = checked and not Path(str(value)).exists()
        lines.append(f"{key}: {value}{'  (missing)' if missing else ''}")
    lines += executor_plan(config)
    lines += _cost_plan(config)
    planned = launches(config)
    lines += [f"tasks ({len(config.tasks)}; {len(planned)} repeats in launch order, each with its state and the "
              "attempt that would run):"]
    lines += [f"  {launch.key}  {launch.domain or '-'}  {launch.state}  attempt {launch.attempt}"
              + ("" if launch.expected_sec is None else f"  expected {launch.expected_sec:.0f}s") for launch in planned]
    first = config.tasks[0]
    argv = runner_args(config, first, 1, config.run_dir / "tasks" / first.id)
    lines.append("runner command (first task): " + " ".join([*RUN_TASK, *argv]))
    forecast = forecast_of(config, planned, upstreams or known_upstreams(config))
    if admission := admission_of(config, forecast):
        lines.append(f"max_active_tasks: auto, at most {admission['ceiling']} at once; starts at {admission['start']} "
                     f"({admission['reason']}) and follows the quota (docs/running.md)")
    lines += plan_lines(forecast)
    return "\n".join(lines)


def plan_json(config: RunConfig, upstreams: Upstreams | None = None) -> dict[str, Any]:
    """The dry run as one JSON object: the run directory, the config's state, the repeats and the forecast."""
    planned = launches(config)
    forecast = forecast_of(config, planned, upstreams or known_upstreams(config))
    return {"run_dir": str(config.run_dir), "config": config_state(config), "executor": config.executor,
            "repeats": [launch.shown() for launch in planned], "admission": admission_of(config, forecast),
            "forecast": forecast.model_dump(mode="json")}


def _cost_plan(config: RunConfig) -> list[str]:
    """The repeats, the prices and the ceiling, as the run will use them."""
    priced = ", ".join(sorted(config.prices or {})) or "none (cost unknown)"
    ceiling = "none" if config.max_cost_usd is None else f"{usd(config.max_cost_usd)} USD"
    spent = SpendMeter(config)
    return [f"repeats: {config.repeats} per task (a task entry's repeats overrides it)",
            f"prices for: {priced}; max_cost_usd: {ceiling}; spent so far: "
            f"{usd(spent.refresh()) + ' USD' if config.prices else 'unknown'}"]
