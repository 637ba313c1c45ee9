"""The run config: one JSON file that says what a panel runs, validated into `RunConfig`.

`load_config(path)` validates, fills the version and agent defaults, resolves relative paths against the
config file and returns a config in which every value is explicit; that resolved form is what a run
directory stores (`config.json`) and compares on resume. `python -m hcu.osworld.queue.config --schema` prints
the JSON Schema shipped as configs/schema/run-config.schema.json.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from hcu import REPO_ROOT

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""Run and task ids become directory names: no separators, no leading dot."""

TUNABLE_KEYS = frozenset({"max_active_tasks", "launch_stagger_seconds"})
"""Keys a resumed run may change; any other difference means a different run."""

Agent = Literal["codex", "claude-code", "gemini-cli", "grok-build"]
Channel = Literal["gui", "a11y", "keyboard"]

AGENT_DEFAULTS: dict[str, tuple[str, str, int]] = {
    "codex": ("gpt-5.5", "xhigh", 8611),
    "claude-code": ("claude-opus-5", "xhigh", 8537),
    "gemini-cli": ("gemini-3.8-flash", "high", 8571),
    "grok-build": ("grok-4.7", "xhigh", 8611),
}
"""agent -> (model, effort, gateway port)."""

VERSION_DEFAULTS: dict[str, tuple[str, int]] = {
    "v1": ("password", 64),
    "v2": ("osworld-public-evaluation", 100),
}
"""benchmark_version -> (client_password, volume_size)."""

DOCKER_BRIDGE_FALLBACK = "172.17.0.1"
"""Docker's usual bridge address, used when the engine cannot be asked."""


class ConfigError(Exception):
    """A config that cannot run; the message is one line naming the key and what was expected."""


def _task_from_id(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


class TaskSpec(BaseModel):
    """One task of the panel, with optional per-task guest overrides."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=SAFE_NAME)
    task_domain: str | None = None
    """OSWorld domain (e.g. libreoffice_calc); falls back to the config's task_domain."""
    volume_size: int | None = Field(default=None, ge=1)
    ram_size: str | None = Field(default=None, pattern=r"^\d+[KMGT]?$")
    stratum: str | None = None
    """A label for summary tables (difficulty, app family, ...)."""


TaskEntry = Annotated[TaskSpec, BeforeValidator(_task_from_id, json_schema_input_type=str | TaskSpec)]


class RunConfig(BaseModel):
    """A panel run. Keys as in OSWORLD.md "Run a panel"; paths are relative to the config file."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Run directory name; defaults to the config file name without .json."""
    benchmark_version: Literal["v1", "v2"]
    agent: Agent
    model: str | None = None
    effort: str | None = None
    tasks: list[TaskEntry] = Field(min_length=1)
    """Task ids, or objects with id and optional task_domain, volume_size, ram_size, stratum."""
    tasks_dir: Path | None = None
    """Folder holding examples/<domain>/<id>.json; None lets the runner use its OSWorld checkout."""

    guest_image: Path | None = None
    """The official qcow2; exactly one of guest_image and test_desktop."""
    test_desktop: str | Literal[True] | None = None
    """Run on the local test desktop: an image reference, or true for the runner's default image."""
    client_password: str | None = None
    volume_size: int | None = Field(default=None, ge=1)
    ram_size: str = Field(default="4G", pattern=r"^\d+[KMGT]?$")
    task_domain: str | None = None

    max_model_calls: int = Field(default=100, ge=0)
    """Per-task budget of counted generations (0 = none); the gateway's --max-requests-per-task."""
    timeout_seconds: float = Field(default=3600.0, ge=0)
    """Per-phase timeout (0 = none)."""
    max_active_tasks: int = Field(default=1, ge=1)
    launch_stagger_seconds: float = Field(default=10.0, ge=0)

    gateway: str | None = Field(default=None, pattern=r"^https?://[^/\s]+/?$")
    """Gateway base URL; defaults to http://<docker bridge address>:<agent port>."""
    token_log: Path | None = None
    """Gateway token log; defaults to runs/<run_id>/gateway-tokens.jsonl."""
    results_dir: Path | None = None
    artifact_dir: Path | None = None
    asset_cache: Path | None = None
    offline_assets: bool = False

    agent_binary: Path | None = None
    mcp_binary: Path | None = None
    instructions_file: str | None = None
    """The interaction guide; "" runs without one (base.md is kept)."""
    base_instructions_file: Path | None = None
    channels: list[Channel] | None = Field(default=None, min_length=1)
    code_mode: bool = False
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

    @field_validator("channels")
    @classmethod
    def _unique_channels(cls, channels: list[str] | None) -> list[str] | None:
        if channels is not None and len(set(channels)) != len(channels):
            raise ValueError("a channel is listed twice")
        return channels

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
    from hcu.osworld.guest.lifecycle import bridge_address  # the engine is asked only when the gateway is left out

    try:
        return bridge_address()
    except Exception:  # no engine or no bridge yet: the documented usual address still works on stock Docker
        return DOCKER_BRIDGE_FALLBACK


def default_guide(channels: list[str] | None) -> Path:
    """The interaction guide for the channels (OSWORLD.md "Isolation and instructions"): hybrid.md, or the
    single-channel guide for an ablation without gui or without a11y."""
    name = "hybrid.md"
    if channels is not None and "gui" not in channels:
        name = "ax-only.md"
    elif channels is not None and "a11y" not in channels:
        name = "gui-only.md"
    return REPO_ROOT / "instructions" / name


def _resolve(base: Path, value: Path | str | None, default: Path | None) -> Path | None:
    if value is None:
        return default
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def resolve(config: RunConfig, config_path: Path) -> RunConfig:
    """Every default filled and every path absolute (idempotent on an already resolved config)."""
    base = config_path.resolve().parent
    model, effort, port = AGENT_DEFAULTS[config.agent]
    password, volume = VERSION_DEFAULTS[config.benchmark_version]
    run_id = config.run_id or config_path.stem
    results_dir = _resolve(base, config.results_dir, REPO_ROOT / "runs")
    assert results_dir is not None
    guide, channels = config.instructions_file, config.channels
    updates: dict[str, Any] = {
        "run_id": run_id,
        "model": config.model or model,
        "effort": config.effort or effort,
        "client_password": config.client_password or password,
        "volume_size": config.volume_size or volume,
        "gateway": (config.gateway or f"http://{docker_bridge_address()}:{port}").rstrip("/"),
        "results_dir": results_dir,
        "token_log": _resolve(base, config.token_log, results_dir / run_id / "gateway-tokens.jsonl"),
        "artifact_dir": _resolve(base, config.artifact_dir, REPO_ROOT / "artifacts"),
        "asset_cache": _resolve(base, config.asset_cache, REPO_ROOT / "assets"),
        "guest_image": _resolve(base, config.guest_image, None),
        "tasks_dir": _resolve(base, config.tasks_dir, None),
        "agent_binary": _resolve(base, config.agent_binary, None),
        "mcp_binary": _resolve(base, config.mcp_binary, None),
        "instructions_file": guide if guide == "" else str(_resolve(base, guide, default_guide(channels))),
        "base_instructions_file": _resolve(base, config.base_instructions_file,
                                           REPO_ROOT / "instructions" / "base.md"),
    }
    return config.model_copy(update=updates)


def describe_error(error: ValidationError) -> str:
    """The first validation error as one line: where, and what was expected."""
    first = error.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown key (expected a key of configs/schema/run-config.schema.json){more}"
    if first["type"] == "missing":
        return f"{where}: missing (a required key){more}"
    if first["type"] == "model_type":
        return f"{where or 'config'}: expected a JSON object{more}"
    message = first["msg"].removeprefix("Value error, ")
    got = f" (got {orjson.dumps(first['input'], default=str).decode()[:60]})"
    return f"{where or 'config'}: {message}{got}{more}"


def parse_config(data: object, config_path: Path) -> RunConfig:
    """Validate and resolve an already-parsed JSON value; ConfigError on anything that cannot run."""
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{config_path}: {describe_error(exc)}") from None
    if (config.guest_image is None) == (config.test_desktop is None):
        raise ConfigError(f"{config_path}: guest_image: expected a qcow2 path, or test_desktop instead "
                          "(exactly one of the two)")
    if config.run_id is None and not re.fullmatch(SAFE_NAME, config_path.stem):
        raise ConfigError(f"{config_path}: run_id: expected letters, digits, '.', '_' or '-' "
                          f"(the file name {config_path.stem!r} cannot be one)")
    return resolve(config, config_path)


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


def config_schema() -> dict[str, Any]:
    return RunConfig.model_json_schema()


def schema_text() -> str:
    return orjson.dumps(config_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


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
