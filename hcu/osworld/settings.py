"""The settings of one attempt, written once as pydantic fields: run_task's and setup_canary's flags and a run
config's keys are all derived from them, so a default, a constraint or a help text exists in one place.

A field `max_model_calls` is the config key `max_model_calls` and the flag `--max-model-calls`; its attribute
docstring is the flag's help. `resolved()` fills every default that depends on other settings (the agent's
model, the benchmark version's password, the guide for the channels) from `hcu.defaults` and the agent's adapter
(`hcu.osworld.agents`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, model_validator

from hcu import REPO_ROOT
from hcu.computer_use.channels import DEFAULT_CHANNELS
from hcu.defaults import (
    ASSET_CACHE_DIR,
    BENCHMARKS,
    GUEST,
    GUEST_STATE,
    SETUP,
    BenchmarkVersion,
    GuestStart,
    KeepFinalDesktop,
)
from hcu.flags import Settings
from hcu.gateway.descriptors import PROVIDERS
from hcu.gateway.options import GatewayOptions
from hcu.osworld.agents import AgentName, agent_cli
from hcu.osworld.records.cost import ModelPrice

Channel = Literal["gui", "a11y", "keyboard"]
SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""Run and task ids become directory and container names: no separators, no leading dot."""
SIZE = r"^[1-9]\d*[MGT]$"
"""A memory size with its unit, as QEMU's RAM_SIZE takes it (4G, 8192M); never zero."""
INSTRUCTIONS = REPO_ROOT / "instructions"


class TaskSettings(Settings):
    benchmark_version: BenchmarkVersion = "v1"
    task_domain: str | None = None
    """OSWorld domain of the task (e.g. libreoffice_calc); searched in every domain when left out."""
    tasks_dir: Path | None = None
    """Folder of V1 task files (examples/<domain>/<id>.json) or V2 task classes (task_<id>.py); default
    $HCU_OSWORLD_TASKS_DIR (V1), else the OSWorld checkout's evaluation_examples (V2: its task_class/)."""


class GuestSettings(Settings):
    guest_image: Path | None = None
    """The official guest qcow2, booted on a per-attempt overlay (exactly one of this and test_desktop)."""
    test_desktop: str | Literal[True] | None = None
    """Run on the locally built test desktop: an image reference, or true (the bare flag) for the default."""
    volume_size: int | None = Field(default=None, ge=1)
    """Guest disk in GiB, at most the image's virtual size; default: the benchmark version's."""
    ram_size: str = Field(default=GUEST.ram_size, pattern=SIZE)
    """Guest memory with its unit (4G, 8192M)."""
    client_password: str | None = None
    """The guest user's sudo password; default: the benchmark version's."""
    guest_docker_image: str = Field(default=GUEST.qemu_docker_image, min_length=1)
    """The container image that boots guest_image with QEMU: the official one, or a local stand-in with its
    contract (`make qemu-guest`); pulled when absent, then pinned by digest (or image id)."""
    guest_start: GuestStart = GUEST_STATE.guest_start
    """snapshot: a QEMU guest restores this host's ready snapshot of its configuration (saved on first use) instead
    of booting, and boots when it cannot (meta.json says why); cold: every guest boots."""
    snapshot_cache: Path | None = None
    """Where this host keeps its guest snapshots; default snapshots/ in hcu's state dir."""

    @model_validator(mode="after")
    def _one_guest(self) -> GuestSettings:
        if (self.guest_image is None) == (self.test_desktop is None):
            raise ValueError("guest_image: expected a qcow2 path, or the test desktop instead (exactly one of the two)")
        return self

    @property
    def test_desktop_image(self) -> str | None:
        return GUEST.test_desktop_image if self.test_desktop is True else self.test_desktop

    def guest_defaults(self, benchmark_version: BenchmarkVersion) -> dict[str, Any]:
        """The guest fields with the benchmark version's defaults filled, for `model_copy(update=...)`."""
        version = BENCHMARKS[benchmark_version]
        return {
            "guest_image": self.guest_image.expanduser().resolve() if self.guest_image else None,
            "snapshot_cache": self.snapshot_cache.expanduser().resolve() if self.snapshot_cache else None,
            "test_desktop": self.test_desktop_image,
            "volume_size": self.volume_size or version.volume_size,
            "client_password": version.client_password if self.client_password is None else self.client_password,
        }


class AssetSettings(Settings):
    asset_cache: Path | None = None
    """Where setup files are cached by URL; default assets/ in this checkout."""
    offline_assets: bool = False
    """A file missing from the asset cache fails setup instead of being downloaded."""
    asset_mirror: str | None = Field(default=None, pattern=r"^https?://\S+$")
    """Fetch cache misses from <mirror>/<host>/<path> (any server of a copied asset cache)."""
    asset_stand_ins: bool = False
    """Offline tests only: serve each task file as a generated stand-in of its type, from a stand-in cache of
    its own (asset_cache, default assets-stand-ins/). Every report says so; run_queue and summarize refuse it."""


class OSWorldSettings(Settings):
    osworld_python: Path | None = None
    """The interpreter that runs OSWorld's setup and evaluator code in its own process (an OSWorld checkout's
    venv python); default the evaluator venv .venv-osworld (`make osworld-venv`)."""


class SetupSettings(Settings):
    setup_step_timeout_seconds: float = Field(default=SETUP.step_timeout_sec, gt=0)
    """Deadline of each setup or postconfig step (OSWorld's server and controller leave some unbounded)."""
    app_start_timeout_seconds: float = Field(default=SETUP.app_start_timeout_sec, gt=0)
    """How long an application may take to show up after the setup step that starts it; an `open` step whose
    file shows no window ends here."""


class AgentSettings(Settings):
    agent: AgentName
    model: str | None = None
    """Default: the agent's (declared by its adapter in hcu.osworld.agents)."""
    effort: str | None = None
    """Default: the agent's."""
    channels: list[Channel] = Field(default=list(DEFAULT_CHANNELS), min_length=1)
    """computer-use channels the agent gets (comma list of gui, a11y, keyboard)."""
    code_mode: bool = False
    """Add the code channel (run_shell, run_python) and its guide."""
    instructions_file: str | None = None
    """The interaction guide; default: the one for the channels; "" runs without one (base.md stays)."""
    base_instructions_file: Path | None = None
    """Default instructions/base.md."""
    artifact_dir: Path | None = None
    """Where the agent CLIs and computer-use are; default artifacts/ in this checkout."""
    agent_binary: Path | None = None
    """The agent CLI to upload; default its file in artifact_dir."""
    mcp_binary: Path | None = None
    """The computer-use server to upload; default artifact_dir/computer-use."""
    record_video: bool = False
    """Record the guest's screen during the agent phase into the task folder's recording.mp4 (the guest's own
    /start_recording, ffmpeg x11grab); a recording that fails never fails the attempt."""

    @model_validator(mode="after")
    def _channels_once(self) -> AgentSettings:
        if len(set(self.channels)) != len(self.channels):
            raise ValueError("channels: a channel is listed twice")
        return self


class TimeoutSettings(Settings):
    timeout_seconds: float = Field(default=3600.0, ge=0)
    """Per-phase timeout (0 = none): boot, setup, probe, agent and evaluation each end at it."""


class LimitSettings(TimeoutSettings):
    max_model_calls: int = Field(default=100, ge=0)
    """Per-task budget of counted generations (0 = no budget); the gateway's --max-requests-per-task."""
    no_progress_seconds: float = Field(default=900.0, ge=0)
    """Stop an agent whose output and model calls stand still this long (0 = never); scored 0 as a timeout."""
    rate_limit_resume_delay: float = Field(default=60.0, ge=0)
    """Wait before resuming a session whose turn ended on a rate limit."""
    gateway_away_seconds: float = Field(default=60.0, ge=0)
    """How long the gateway may not answer during the agent phase (a restart on the same token log) before the
    attempt ends as a gateway failure."""
    settle_seconds: float = Field(default=20.0, ge=0)
    """Wait after the agent's last action before evaluating, as OSWorld's own runner does."""


class KeepSettings(Settings):
    keep_final_desktop: KeepFinalDesktop = GUEST_STATE.keep_final_desktop
    """Keep the final desktop (saved after settle, before the evaluator reads it) beside the results, to regrade
    it or open it later without the agent: none, zeros (attempts that did not score above 0), or all."""
    keep_final_desktop_budget_gb: float = Field(default=GUEST_STATE.keep_budget_gb, ge=0)
    """Disk all of one run's kept desktops may take; past it a desktop is not kept (meta.json says so)."""


class CostSettings(Settings):
    prices: dict[str, ModelPrice] | None = None
    """Per model the run uses, its price (JSON: {"<model>": {"input_usd_per_mtok": ..., ...}}): an attempt's
    cost_usd comes from its token-log rows at these prices; without a price its cost is unknown, never 0."""


def price_problem(prices: dict[str, ModelPrice] | None, model: str, agent: AgentName) -> str | None:
    """Why `prices` cannot price this run's rows (a model it does not use, a cache-write price where the provider
    bills none, or none where it does); None when they can."""
    provider = agent_cli(agent).provider
    for name, price in (prices or {}).items():
        if name != model:
            return f"prices.{name}: not a model this run uses (its model is {model})"
        if provider.bills_cache_writes and price.cache_write_usd_per_mtok is None:
            return (f"prices.{name}.cache_write_usd_per_mtok: required for an {provider.title} model (cache writes "
                    "bill apart)")
        if not provider.bills_cache_writes and price.cache_write_usd_per_mtok is not None:
            billing = " and ".join(p.title for p in PROVIDERS.values() if p.bills_cache_writes)
            return (f"prices.{name}.cache_write_usd_per_mtok: only {billing} bills cache writes apart "
                    f"(agent {agent} talks to {provider.name})")
    return None


class GatewaySettings(Settings):
    gateway: str | None = Field(default=None, pattern=r"^https?://[^/\s]+/?$")
    """Gateway base URL; default http://<docker bridge address>:<the agent's port>."""
    token_log: Path | None = None
    """The gateway's token log, read for the attempt's usage."""
    scope_key_file: Path | None = None
    """The key file the gateway was started with (its --scope-key-file): the agent's credential becomes the
    attempt's scope secret, so no other guest can use, read or end this attempt's scope. Created when missing."""


def gateway_options(*, host: str, token_log: Path, max_model_calls: int, scope_key_file: Path | None,
                    rate_limit_max_wait: float | None = None) -> GatewayOptions:
    """The options of the gateway a run's attempts talk to, listening on `host`: the one place where a run's settings
    become its gateway's flags (`token_log` is its --out, `max_model_calls` its --max-requests-per-task; both names
    are the reference's), with its rate-limit wait where the run sets one."""
    given = {} if rate_limit_max_wait is None else {"rate_limit_max_wait": rate_limit_max_wait}
    return GatewayOptions(host=host, out=token_log, max_requests_per_task=max_model_calls,
                          scope_key_file=scope_key_file, **given)


RUN_GATEWAY_FIELDS = frozenset(gateway_options(host="", token_log=Path(), max_model_calls=0,
                                               scope_key_file=None).model_fields_set)
"""The gateway's fields every run fills (where it listens, its token log, budget and scope key), whatever its
values."""


class GuestAttemptSettings(SetupSettings, OSWorldSettings, AssetSettings, GuestSettings, TaskSettings):
    """What the phases every attempt has (hcu/osworld/attempt/guest_phases.py) read: the task, its guest, its
    files, OSWorld's interpreter and the setup's deadlines. An attempt with an agent adds the rest
    (`AttemptSettings`), the canary its own options."""


class AttemptSettings(CostSettings, KeepSettings, GatewaySettings, LimitSettings, AgentSettings,
                      GuestAttemptSettings):
    """Everything one attempt runs with, apart from which task it is and where its results go."""

    @model_validator(mode="after")
    def _prices_fit_the_run(self) -> AttemptSettings:
        problem = price_problem(self.prices, self.model or agent_cli(self.agent).model, self.agent)
        if problem is not None:
            raise ValueError(problem)
        return self

    def default_guide(self) -> Path:
        """hybrid.md, or the single-channel guide for an ablation without gui or without a11y."""
        if "gui" not in self.channels:
            return INSTRUCTIONS / "ax-only.md"
        if "a11y" not in self.channels:
            return INSTRUCTIONS / "gui-only.md"
        return INSTRUCTIONS / "hybrid.md"

    def guide_path(self) -> Path | None:
        """The interaction guide to deliver; None when the run asked for none."""
        if self.instructions_file == "":
            return None
        return Path(self.instructions_file) if self.instructions_file else self.default_guide()

    def resolved(self: S, base: Path, gateway_host: Callable[[], str]) -> S:
        """A copy with every default filled and every path absolute (relative ones against `base`);
        `gateway_host` is asked only when no gateway is set. Idempotent."""
        agent = agent_cli(self.agent)
        guide = self.instructions_file
        updates: dict[str, Any] = {
            **self.guest_defaults(self.benchmark_version),
            "model": self.model or agent.model,
            "effort": self.effort or agent.effort,
            "gateway": (self.gateway or f"http://{gateway_host()}:{agent.gateway_port}").rstrip("/"),
            "instructions_file": "" if guide == "" else str(absolute(base, guide or self.default_guide())),
            "base_instructions_file": absolute(base, self.base_instructions_file or INSTRUCTIONS / "base.md"),
            "artifact_dir": absolute(base, self.artifact_dir or REPO_ROOT / "artifacts"),
            "asset_cache": absolute(base, self.asset_cache) if self.asset_cache else
            None if self.asset_stand_ins else ASSET_CACHE_DIR,  # stand-ins: their own default cache
            "offline_assets": self.offline_assets or self.asset_stand_ins,
        }
        if self.guest_image is not None:
            updates["guest_image"] = absolute(base, self.guest_image)
        for key in ("tasks_dir", "token_log", "scope_key_file", "snapshot_cache"):
            value = getattr(self, key)
            updates[key] = None if value is None else absolute(base, value)
        # not resolved: a venv's python is a symlink to the base interpreter, which lacks the venv's packages; and
        # a binary is named as its default is (artifact_dir/<name>, a symlink or not), so a stored config resolves
        # to itself
        for key in ("osworld_python", "agent_binary", "mcp_binary"):
            value = getattr(self, key)
            updates[key] = None if value is None else base / value.expanduser()
        resolved = self.model_copy(update=updates)
        resolved.agent_binary = resolved.agent_binary or resolved.artifact_dir / agent.artifacts[0].name
        resolved.mcp_binary = resolved.mcp_binary or resolved.artifact_dir / "computer-use"
        return resolved


S = TypeVar("S", bound=AttemptSettings)


def absolute(base: Path, value: Path | str) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()
