"""The --dry-run report of run_queue: resolved paths, the gateway flags, the executor, repeats and cost, and
what would launch. Reads the run directory; writes nothing."""

from __future__ import annotations

from pathlib import Path

from hcu.osworld.queue.config import RunConfig
from hcu.osworld.queue.launch import RUN_TASK, runner_args
from hcu.osworld.queue.order import LaunchQueue, expected_durations
from hcu.osworld.queue.panel import config_difference
from hcu.osworld.queue.spend import SpendMeter, usd
from hcu.osworld.queue.state import scan_task
from hcu.osworld.records.identity import repeat_key, split_repeat_key


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
        env = f" (in its environment: {token_variable(config)}=${token_env})" if token_env else ""
        lines.append("gateway: each node starts " + " ".join(argv[1:]).replace(" 0 ", " <free port> ") + env)
    if config.scope_key_file is not None:
        lines.append(f"scope key: {config.scope_key_file}, shipped to every node "
                     f"({'in the shared directory' if config.ray.shared_dir else 'through Ray'})")
    return lines


def describe_plan(config: RunConfig) -> str:
    """The --dry-run report: resolved paths, the gateway flags, and what would launch. Writes nothing."""
    changed = config_difference(config)
    lines = [f"run directory: {config.run_dir}",
             "config: new run" if changed is None else
             ("config: matches the stored config.json (resume)" if not changed else
              f"config: REFUSED, {', '.join(changed)} differ from the stored config.json")]
    if not config.node_gateways:
        lines += [f"gateway: {config.gateway}",
                  f"gateway flags: --out {config.token_log} --max-requests-per-task {config.max_model_calls}"
                  + (" (0 = no budget)" if config.max_model_calls == 0 else "")
                  + f" --scope-key-file {config.scope_key_file}"]
    for key in ("guest_image", "test_desktop", "tasks_dir", "results_dir", "token_log", "artifact_dir",
                "asset_cache", "agent_binary", "mcp_binary", "instructions_file", "base_instructions_file"):
        value = getattr(config, key)
        checked = key not in ("test_desktop", "results_dir", "token_log") and value not in (None, "")
        missing = checked and not Path(str(value)).exists()
        lines.append(f"{key}: {value}{'  (missing)' if missing else ''}")
    lines += executor_plan(config)
    lines += _cost_plan(config)
    expected = expected_durations(config)
    specs = {task.id: task for task in config.tasks}
    units = [(task.id, repeat) for task in config.tasks for repeat in range(1, config.repeats_of(task) + 1)]
    order = LaunchQueue(units, expected)
    for task_id, repeat in units:
        order.push(repeat_key(task_id, repeat))
    launches = []
    for key in (order.pop() for _ in units):
        task_id, repeat = split_repeat_key(key)
        view, task = scan_task(config.run_dir, task_id, repeat), specs[task_id]
        known = f"  expected {expected[task_id]:.0f}s" if task_id in expected else ""
        launches.append(f"  {key}  {config.domain_of(task) or '-'}  {view.state}  attempt {view.attempt}{known}")
    lines += [f"tasks ({len(config.tasks)}; {len(units)} repeats in launch order, each with its state and the "
              "attempt that would run):", *launches]
    first = config.tasks[0]
    argv = runner_args(config, first, 1, config.run_dir / "tasks" / first.id)
    lines.append("runner command (first task): " + " ".join([*RUN_TASK, *argv]))
    return "\n".join(lines)


def _cost_plan(config: RunConfig) -> list[str]:
    """The repeats, the prices and the ceiling, as the run will use them."""
    priced = ", ".join(sorted(config.prices or {})) or "none (cost unknown)"
    ceiling = "none" if config.max_cost_usd is None else f"{usd(config.max_cost_usd)} USD"
    spent = SpendMeter(config)
    return [f"repeats: {config.repeats} per task (a task entry's repeats overrides it)",
            f"prices for: {priced}; max_cost_usd: {ceiling}; spent so far: "
            f"{usd(spent.refresh()) + ' USD' if config.prices else 'unknown'}"]
