"""The run config: one JSON file that says what a panel runs, validated into `RunConfig`.

Its keys are the attempt settings every task shares (`hcu.osworld.settings`, the same fields as run_task's
flags) plus the panel's own. `load_config(path)` validates, fills every default, resolves relative paths
against the config file and returns a config in which every value is explicit; that resolved form is what a
run directory stores (`config.json`) and compares on resume. `python -m hcu.osworld.queue.config --schema`
prints the JSON Schema shipped as configs/schema/run-config.schema.json.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import BeforeValidator, Field, ValidationError, field_validator

from hcu import REPO_ROOT
from hcu.osworld.osworld_bridge.assets import holds_stand_ins
from hcu.osworld.settings import SAFE_NAME, SIZE, AttemptSettings, Settings, absolute, describe_error

TUNABLE_KEYS = frozenset({"max_active_tasks", "launch_stagger_seconds"})
"""Keys a resumed run may change; any other difference means a different run."""

DOCKER_BRIDGE_FALLBACK = "172.17.0.1"
"""Docker's usual bridge address, used when the engine cannot be asked (a dry run on a machine without one)."""


class ConfigError(Exception):
    """A config that cannot run; the message is one line naming the key and what was expected."""


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


TaskEntry = Annotated[TaskSpec, BeforeValidator(_task_from_id, json_schema_input_type=str | TaskSpec)]


class RunConfig(AttemptSettings):
    """A panel run: the attempt settings its tasks share, plus the panel's own keys (OSWORLD.md "Run a
    panel"). Paths are relative to the config file."""

    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Run directory name; defaults to the config file name without .json."""
    tasks: list[TaskEntry] = Field(min_length=1)
    """Task ids, or objects with id and optional task_domain, volume_size, ram_size, stratum."""
    max_active_tasks: int = Field(default=1, ge=1)
    launch_stagger_seconds: float = Field(default=10.0, ge=0)
    results_dir: Path | None = None
    """Where run directories go; default runs/ in this checkout."""
    scripted_model: bool = False
    """True when a scripted upstream stands in for the model: the score measures the harness, not a model."""

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, tasks: list[TaskSpec]) -> list[TaskSpec]:
        seen: set[str] = set()
        for task in tasks:
            if task.id in seen:
                raise ValueError(f"duplicate task id {task.id!r} (expected each id once)")
            seen.add(task.id)
        return tasks

    @property
    def run_dir(self) -> Path:
        assert self.results_dir is not None and self.run_id is not None, "use load_config()"
        return self.results_dir / self.run_id

    def domain_of(self, task: TaskSpec) -> str | None:
        return task.task_domain or self.task_domain

    def comparable(self) -> dict[str, Any]:
        """The resolved config minus the keys a resumed run may change."""
        return self.model_dump(mode="json", exclude=set(TUNABLE_KEYS))


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
    # A panel runs with per-task secrets: its gateway takes the same key file (--dry-run prints the flag).
    scope_key_file = absolute(base, config.scope_key_file or results_dir / run_id / "gateway-scope.key")
    panel = config.model_copy(update={"run_id": run_id, "results_dir": results_dir, "token_log": token_log,
                                      "scope_key_file": scope_key_file})
    return panel.resolved(base, docker_bridge_address)


def parse_config(data: object, config_path: Path) -> RunConfig:
    """Validate and resolve an already-parsed JSON value; ConfigError on anything that cannot run."""
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{config_path}: {describe_error(exc)}") from None
    if config.run_id is None and not re.fullmatch(SAFE_NAME, config_path.stem):
        raise ConfigError(f"{config_path}: run_id: expected letters, digits, '.', '_' or '-' "
                          f"(the file name {config_path.stem!r} cannot be one)")
    resolved = resolve(config, config_path)
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
    parser = argparse.ArgumentParser(prog="python -m hcu.osworld.queue.config",
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
