"""The run config: one JSON file that says what a panel runs, validated into `RunConfig`.

Its keys are the attempt settings every task shares (`hcu.osworld.settings`, the same fields as run_task's
flags) plus the panel's own. `load_config(path)` validates, fills every default, resolves relative paths
against the config file and returns a config in which every value is explicit; that resolved form is what a
run directory stores (`config.json`) and compares on resume. `python -m hcu.osworld.run_config --schema`
prints the JSON Schema shipped as configs/schema/run-config.schema.json.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError, field_validator, model_validator

from hcu import REPO_ROOT
from hcu.defaults import GATEWAY
from hcu.flags import Settings, describe_error, flag_name
from hcu.gateway.descriptors import PROVIDERS
from hcu.osworld.agents import agent_cli
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.osworld_bridge.assets import holds_stand_ins
from hcu.osworld.quota.limits import QuotaLimit, key_problem, unmatched_key, upstreams_in_args
from hcu.osworld.quota.profile import PilotError, open_pilot
from hcu.osworld.records.identity import ambiguous_task_id
from hcu.osworld.records.sweep_file import SweepUnreadable, read_sweep
from hcu.osworld.settings import RUN_GATEWAY_FIELDS, SAFE_NAME, SIZE, AttemptSettings, absolute

TUNABLE_KEYS = frozenset({"max_active_tasks", "auto_max_active_tasks", "launch_stagger_seconds",
                          "expected_durations_from", "max_cost_usd", "forecast_from", "quota", "baseline"})
"""Keys a resumed run may change; any other difference means a different run (`repeats` may be raised: see
`resume.lowered_repeats`). `forecast_from` and `quota` change what the queue foresees and how many attempts it lets run
at once, `baseline` what the summary reports beside the score, never what an attempt does or how it is scored."""
TUNABLE_RAY_KEYS = frozenset({"address"})
"""Keys of `ray` a resumed run may change (a restarted cluster has a new address; its nodes are the same)."""

DOCKER_BRIDGE_FALLBACK = "172.17.0.1"
"""Docker's usual bridge address, used when the engine cannot be asked (a dry run on a machine without one)."""


class ConfigError(HcuOSWorldError):
    """A config that cannot run; the message is one line naming the key and what was expected."""


AUTO = "auto"
"""max_active_tasks that follows the quota."""


_POSITIVE = TypeAdapter(Annotated[int, Field(ge=1)])


def _active_tasks(value: Any) -> Any:
    if value == AUTO:
        return value
    try:
        return _POSITIVE.validate_python(value)
    except ValidationError:
        raise ValueError(f'expected a positive integer or "{AUTO}"') from None


ActiveTasks = Annotated[Annotated[int, Field(ge=1)] | Literal["auto"], BeforeValidator(_active_tasks)]


def _task_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


class TaskSpec(Settings):
    """One task of the panel, with optional per-task guest overrides."""

    id: str = Field(pattern=SAFE_NAME)
    task_domain: str | None = None
    """OSWorld domain (e.g. libreoffice_calc); falls back to the config's task_domain."""
    volume_size: int | None = Field(default=None, ge=1)
    ram_size: str | None = Field(default=None, pattern=SIZE)
    stratum: str | None = None
    """A label for summary tables (difficulty, app family, ...)."""
    repeats: int | None = Field(default=None, ge=1)
    """This task's scored attempts; falls back to the config's repeats."""

    @field_validator("id")
    @classmethod
    def _not_a_repeat_name(cls, task_id: str) -> str:
        if ambiguous_task_id(task_id):
            raise ValueError(f"{task_id!r} ends like a repeat's folder (<task>.r<n>); expected an id without "
                             "that suffix")
        return task_id


TaskEntry = Annotated[TaskSpec, BeforeValidator(_task_from_id, json_schema_input_type=str | TaskSpec)]


HCU_GATEWAY_FLAGS = frozenset({*map(flag_name, RUN_GATEWAY_FIELDS), *(p.port_flag for p in PROVIDERS.values()),
                               "--upstream-token"})
"""Gateway flags hcu fills on each node (`settings.gateway_options`, and the port); the upstream token is never a
flag (it comes from upstream_token_env, through the gateway's environment)."""


class NodeGateway(Settings):
    """The gateway every Ray node starts for the run on its own Docker bridge: the agent's gateway module with
    these upstream flags; hcu adds --host (the node's bridge address), the port, --out (the node's token log),
    --max-requests-per-task (max_model_calls) and --scope-key-file (the run's key, shipped to the node).
    Credentials never go here: a node's gateway finds them in that node's environment."""

    upstream_args: list[str] = Field(min_length=1)
    """The gateway's upstream flags, e.g. ["--upstreams", "host", "--upstream-kind", "azure"]."""
    upstream_token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable on each node whose value the node's gateway gets as its own credential variable
    (the one its provider's gateway reads, `token_env` in hcu/gateway/descriptors.py); unset: the gateway reads
    its own variable (or, for Azure, its Entra ID credential) from the node's environment."""
    rate_limit_max_wait: float = Field(default=GATEWAY.rate_limit_max_wait_sec, ge=0)
    """The node gateways' --rate-limit-max-wait."""

    def refused_flag(self) -> str | None:
        """A flag hcu sets itself on each node, if upstream_args has one (checked after validation, so the
        error never echoes the value: it could be a token)."""
        for arg in self.upstream_args:
            flag = arg.split("=", 1)[0]
            if flag in HCU_GATEWAY_FLAGS:
                return flag
        return None


class RaySettings(Settings):
    """Where and how the ray executor runs attempts (see README "Scale-out on Ray")."""

    address: str = Field(min_length=1)
    """The cluster to join: "auto" (the cluster this machine belongs to) or the head's GCS host:port."""
    namespace: str = Field(default="hcu", pattern=SAFE_NAME)
    """Ray namespace of the run's detached actors (attempts and node agents)."""
    slot_resource: str = Field(default="hcu_guest_slot", pattern=SAFE_NAME)
    """The custom resource a node advertises once per guest it can run (`ray start --resources`)."""
    node_gateway: NodeGateway | None = None
    """How each node starts the run's gateway; without it every node's guests use `gateway` (which must
    then be reachable from every node's guests)."""
    shared_dir: Path | None = None
    """A directory mounted at the same path on every node and the head: nodes write attempts and token logs
    there and the head moves them into the run directory; default: they come back through Ray."""


class ExecutorKeys(Settings):
    """Panel keys of the executor, apart from the attempt settings."""

    executor: Literal["local", "ray"] = "local"
    """local: this host's Docker engine (no Ray needed); ray: attempts on the nodes of a Ray cluster."""
    ray: RaySettings | None = None
    """Required with executor "ray"."""

    @model_validator(mode="after")
    def _ray_when_ray(self) -> ExecutorKeys:
        if (self.executor == "ray") != (self.ray is not None):
            raise ValueError("ray: expected the ray settings exactly when executor is \"ray\"")
        return self


class RunConfig(ExecutorKeys, AttemptSettings):
    """A panel run: the attempt settings its tasks share, plus the panel's own keys. Paths are relative to the
    config file."""

    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Run directory name; defaults to the config file name without .json."""
    tasks: list[TaskEntry] = Field(min_length=1)
    """Task ids, or objects with id and optional task_domain, volume_size, ram_size, stratum, repeats."""
    repeats: int = Field(default=1, ge=1)
    """Scored attempts per task (a task entry's repeats overrides it). Each repeat has its own identity (scope,
    container, folder tasks/<id>.r<n>/ from the second on) and its own retries; a task's score is the mean of its
    repeats. A resumed run may raise it (only the added repeats run), never lower it."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Campaign ceiling: no attempt starts once the run's spend, read from its token log at the run's prices,
    has reached it (running attempts finish); a resumed run may change it. Needs a price for the run's model."""
    max_active_tasks: ActiveTasks = 1
    """Attempts running at once; with executor ray, also at most the guest slots the live nodes advertise. "auto":
    as many as the quota serves, found by the admission that follows it (docs/running.md), up to
    auto_max_active_tasks."""
    auto_max_active_tasks: int | None = Field(default=None, gt=0, strict=True)
    """With max_active_tasks "auto" (and only then, required): the most attempts it may run at once."""
    launch_stagger_seconds: float = Field(default=10.0, ge=0)
    results_dir: Path | None = None
    """Where run directories go; default runs/ in this checkout."""
    scripted_model: bool = False
    """True when a scripted upstream stands in for the model: the score measures the harness, not a model."""
    expected_durations_from: list[Path] | None = None
    """Earlier run directories whose result.json durations order launches, longest expected first; default:
    every other run in results_dir with the same benchmark_version; [] keeps the config's order."""
    forecast_from: list[Path] | None = None
    """Earlier run directories of this agent and model (a pilot) whose attempts the campaign forecast learns from:
    their result.json files and token logs (`--dry-run` prints the forecast; QUEUE_STATUS.md updates it with this
    run's own attempts)."""
    quota: dict[str, QuotaLimit] | None = None
    """The model quota the campaign runs on, {"tpm": ..., "rpm": ...} per provider (openai, anthropic, gemini), per
    upstream resource (host[:port]) or per deployment (host[:port]@deployment) as the gateway's --upstreams names
    them: the forecast's safe concurrency is what it serves at once."""

    baseline: Path | None = None
    """A canary sweep's folder (`python -m hcu.osworld.canary_sweep ... --run-evaluator`, holding sweep.json): the
    run's do-nothing baseline. summarize marks the tasks the evaluator passes in their untouched state and reports
    the score without them beside the score; the attempts and the score itself are unchanged."""

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, tasks: list[TaskSpec]) -> list[TaskSpec]:
        seen: set[str] = set()
        for task in tasks:
            if task.id in seen:
                raise ValueError(f"duplicate task id {task.id!r} (expected each id once)")
            seen.add(task.id)
        return tasks

    @model_validator(mode="after")
    def _ceiling_has_prices(self) -> RunConfig:
        model = self.model or agent_cli(self.agent).model
        if self.max_cost_usd is not None and model not in (self.prices or {}):
            raise ValueError(f"max_cost_usd: needs a price for the run's model (prices.{model}); without one the "
                             "spend is unknown")
        return self

    @model_validator(mode="after")
    def _auto_has_a_ceiling(self) -> RunConfig:
        if self.max_active_tasks == AUTO and self.auto_max_active_tasks is None:
            raise ValueError('max_active_tasks: "auto" needs auto_max_active_tasks, the most attempts it may run at '
                             "once (a positive integer)")
        if self.max_active_tasks != AUTO and self.auto_max_active_tasks is not None:
            raise ValueError('auto_max_active_tasks: only with "max_active_tasks": "auto" (got max_active_tasks '
                             f"{self.max_active_tasks})")
        return self

    @property
    def active_ceiling(self) -> int:
        """The most attempts the config lets run at once: max_active_tasks, or auto's ceiling."""
        return (self.auto_max_active_tasks or 1) if self.max_active_tasks == AUTO else int(self.max_active_tasks)

    @model_validator(mode="after")
    def _quota_names_the_run(self) -> RunConfig:
        for key in self.quota or {}:
            if problem := key_problem(key):
                raise ValueError(f"quota.{key}: {problem}")
        node_gateway = self.ray.node_gateway if self.ray is not None else None
        upstreams = upstreams_in_args(node_gateway.upstream_args) if node_gateway is not None else None
        unmatched = unmatched_key(self.quota or {}, agent_cli(self.agent).provider.name, upstreams)
        if unmatched is not None:
            raise ValueError(unmatched)
        return self

    def repeats_of(self, task: TaskSpec) -> int:
        return task.repeats or self.repeats

    @property
    def run_dir(self) -> Path:
        assert self.results_dir is not None and self.run_id is not None, "use load_config()"
        return self.results_dir / self.run_id

    def task_settings(self, task: TaskSpec) -> RunConfig:
        """The config's attempt settings with the task's own overrides (its domain and guest sizes)."""
        return self.model_copy(update={"task_domain": self.domain_of(task),
                                       "volume_size": task.volume_size or self.volume_size,
                                       "ram_size": task.ram_size or self.ram_size})

    def domain_of(self, task: TaskSpec) -> str | None:
        return task.task_domain or self.task_domain

    @property
    def node_gateways(self) -> bool:
        """True when each Ray node starts the run's gateway (then `gateway` stays unset)."""
        return self.ray is not None and self.ray.node_gateway is not None

    def comparable(self) -> dict[str, Any]:
        """The resolved config minus the keys a resumed run may change (repeats included: raising them adds
        attempts to the same run; `resume.lowered_repeats` refuses the other way)."""
        exclude: dict[str, Any] = {**dict.fromkeys(TUNABLE_KEYS, True), "repeats": True,
                                   "tasks": {"__all__": {"repeats"}}}
        if self.ray is not None:
            exclude["ray"] = set(TUNABLE_RAY_KEYS)
        return self.model_dump(mode="json", exclude=exclude)


def docker_bridge_address() -> str:
    """The address guests reach the host on (the default bridge's gateway)."""
    from hcu.osworld.guest.bridge import bridge_address  # the engine is asked only when the gateway is left out

    try:
        return bridge_address()
    except Exception:  # no engine or no bridge yet: the documented usual address still works on stock Docker
        return DOCKER_BRIDGE_FALLBACK


def resolve(config: RunConfig, config_path: Path) -> RunConfig:
    """Every default filled and every path absolute (idempotent on an already resolved config)."""
    base = config_path.resolve().parent
    run_id = config.run_id or config_path.stem
    results_dir = absolute(base, config.results_dir or REPO_ROOT / "runs")
    token_log = absolute(base, config.token_log or results_dir / run_id / "gateway-tokens.jsonl")
    # A panel runs with per-task secrets: its gateway takes the same key file (--dry-run prints the flag); with
    # the ray executor the head ships this key to every node (queue/node_key.py).
    scope_key_file = absolute(base, config.scope_key_file or results_dir / run_id / "gateway-scope.key")
    durations = [absolute(base, path) for path in config.expected_durations_from or []]
    pilots = [absolute(base, path) for path in config.forecast_from or []]
    panel = config.model_copy(update={
        "run_id": run_id, "results_dir": results_dir, "token_log": token_log, "scope_key_file": scope_key_file,
        "expected_durations_from": None if config.expected_durations_from is None else durations,
        "forecast_from": None if config.forecast_from is None else pilots,
        "baseline": None if config.baseline is None else absolute(base, config.baseline)})
    if config.ray is not None and config.ray.shared_dir is not None:
        panel.ray = config.ray.model_copy(update={"shared_dir": absolute(base, config.ray.shared_dir)})
    if not config.node_gateways:
        return panel.resolved(base, docker_bridge_address)
    resolved = panel.resolved(base, lambda: DOCKER_BRIDGE_FALLBACK)
    resolved.gateway = None  # each node fills in its own
    return resolved


def validate_config(data: object, config_path: Path) -> RunConfig:
    """An already-parsed JSON value as a RunConfig, unresolved; ConfigError naming the key when it is not one
    (the line run_queue prints, and summarize for a stored config)."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{config_path}: {describe_error(exc)}") from None


def stored_config(run_dir: Path) -> RunConfig:
    """A run directory's stored config (config.json, resolved when it was written); ConfigError in one line when
    there is none or it does not read (the tools that read a finished run wrap it in their own)."""
    path = run_dir / "config.json"
    try:
        return validate_config(orjson.loads(path.read_bytes()), path)
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: no config.json (not a run directory)") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None


def parse_config(data: object, config_path: Path) -> RunConfig:
    """Validate and resolve an already-parsed JSON value; ConfigError on anything that cannot run."""
    config = validate_config(data, config_path)
    flag = config.ray.node_gateway.refused_flag() if config.ray and config.ray.node_gateway else None
    if flag is not None:
        hint = " (a token: name its environment variable in upstream_token_env)" if flag == "--upstream-token" else ""
        raise ConfigError(f"{config_path}: ray.node_gateway.upstream_args: {flag} is set by hcu on each node{hint}")
    if config.node_gateways and config.gateway is not None:
        raise ConfigError(f"{config_path}: gateway: not used with ray.node_gateway (each node starts its own "
                          "gateway on its own bridge); leave it out")
    if config.run_id is None and not re.fullmatch(SAFE_NAME, config_path.stem):
        raise ConfigError(f"{config_path}: run_id: expected letters, digits, '.', '_' or '-' "
                          f"(the file name {config_path.stem!r} cannot be one)")
    resolved = resolve(config, config_path)
    if resolved.baseline is not None:
        try:
            read_sweep(resolved.baseline)
        except SweepUnreadable as exc:
            raise ConfigError(f"{config_path}: baseline: {exc}") from None
    for index, pilot in enumerate(resolved.forecast_from or []):
        try:
            open_pilot(pilot, resolved.agent, str(resolved.model), resolved.run_dir)
        except PilotError as exc:
            raise ConfigError(f"{config_path}: forecast_from[{index}]: {exc}") from None
    if resolved.asset_stand_ins or (resolved.asset_cache is not None and holds_stand_ins(resolved.asset_cache)):
        raise ConfigError(f"{config_path}: asset_stand_ins: a run config makes a scored run, and stand-ins "
                          f"(generated task files, {resolved.asset_cache}) never enter one; they are for "
                          "setup_canary, canary_sweep and single run_task checks")
    return resolved


def load_config(path: Path | str) -> RunConfig:
    """Read, validate and resolve a run config file."""
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc.strerror})") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    return parse_config(data, path)


def schema_text() -> str:
    return orjson.dumps(RunConfig.model_json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() \
        + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hcu.osworld.run_config",
                                     description="Validate a run config, or print its JSON Schema.")
    parser.add_argument("config", nargs="?", type=Path, help="a run config to validate and print resolved")
    parser.add_argument("--schema", action="store_true", help="print the JSON Schema of the run config")
    args = parser.parse_args(argv)
    if args.schema:
        sys.stdout.write(schema_text())
        return 0
    if args.config is None:
        parser.error("give a CONFIG or --schema")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(config.model_dump_json(indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
