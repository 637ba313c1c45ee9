"""The shared interface of the agent adapters: what a run needs (context), what it uploads and runs (plan),
and what came out of one turn (outcome). One adapter module per CLI renders these for its own flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hcu.computer_use.call_log import ENV_DIR as CALL_LOG_ENV
from hcu.computer_use.channels import parse_channels, tools_for
from hcu.defaults import GUEST
from hcu.osworld.agents.declaration import AgentCli
from hcu.osworld.errors import ConfigurationError
from hcu.osworld.records.result import ProtocolWord

PROTOCOL_WORDS: tuple[ProtocolWord, ...] = ("TASK_COMPLETE", "TASK_INFEASIBLE", "ASK_USER")

PLACEHOLDER_TOKEN = "hcu-placeholder-token"
"""The credential a guest sees when per-task secrets are off; the gateway drops it and adds the real one."""

MCP_SERVER_NAME = "cu"
GUEST_ROOT = f"{GUEST.home}/.hcu"
"""Where hcu puts what it uploads into a guest."""
COMPUTER_USE_PATH = f"{GUEST_ROOT}/bin/computer-use"
RESUME_PROMPT = "Continue the task from where you stopped."

SHELL_INHERITED_PATHS: tuple[str, ...] = (".envrc",)
"""Files a shell hook (direnv) loads in the agent's working directory, whichever CLI runs; each adapter declares
its CLI's own (`AgentCli.inherited_paths`)."""

# The guest desktop session every MCP child must join (Codex filters its children's environment).
DEFAULT_DESKTOP_ENV: dict[str, str] = {
    "DISPLAY": ":0",
    "XDG_RUNTIME_DIR": "/run/user/1000",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
}


class AgentContext(BaseModel):
    """Everything an adapter needs to render one task's agent run."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    gateway_url: str = Field(pattern=r"^https?://[^/\s]+$")
    model: str = Field(min_length=1)
    effort: str = Field(min_length=1)
    channels: list[str] = Field(min_length=1)
    code_mode: bool = False
    base_instructions: str
    profile_instructions: str | None = None
    prompt: str = Field(min_length=1)
    session_id: str = Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    gateway_token: str = Field(default=PLACEHOLDER_TOKEN, min_length=1, repr=False)
    """What the CLI sends as its API key: the placeholder, or the attempt's scope secret when per-task secrets
    are on (`hcu.gateway.scope_secret`). Never the upstream credential."""
    guest_home: str = GUEST.home
    guest_root: str = GUEST_ROOT
    computer_use_path: str = COMPUTER_USE_PATH
    desktop_env: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_DESKTOP_ENV))
    call_log_dir: str | None = None
    """Guest folder where computer-use records every tool call and the screen after each action (the attempt's
    evidence, brought home by `hcu.osworld.evidence.collect_evidence`); None records nothing."""

    @field_validator("gateway_url", mode="before")
    @classmethod
    def _no_trailing_slash(cls, value: object) -> object:
        return value.rstrip("/") if isinstance(value, str) else value

    def scoped_url(self, suffix: str = "") -> str:
        """`<gateway>/t/<scope><suffix>`: the only model endpoint the guest is given."""
        return f"{self.gateway_url}/t/{self.scope}{suffix}"

    def path(self, *parts: str) -> str:
        return "/".join((self.guest_root, *parts))

    @property
    def tool_names(self) -> list[str]:
        """computer-use tools the chosen channels (and code mode) list, in the server's order."""
        return tools_for(parse_channels(",".join(self.channels), code_mode=self.code_mode))

    @property
    def instructions_text(self) -> str:
        """Base plus profile as one text, for CLIs whose system prompt is a single override."""
        if not self.profile_instructions:
            return self.base_instructions
        return f"{self.base_instructions.rstrip()}\n\n{self.profile_instructions}"


class GuestFile(BaseModel):
    """One file to upload: from the host (`host_path`) or rendered (`data`)."""

    model_config = ConfigDict(extra="forbid")

    guest_path: str
    host_path: Path | None = None
    data: bytes | None = None
    mode: int = 0o644


class McpServerSpec(BaseModel):
    """The computer-use server exactly as the CLI will start it (the MCP probe starts the same)."""

    model_config = ConfigDict(extra="forbid")

    command: str
    args: list[str]
    env: dict[str, str]


class AgentPlan(BaseModel):
    """What the runner uploads, prepares and executes in the guest for one agent session. The runner starts
    the argv lists in the guest user's home with `env`, stdin from /dev/null (Codex reads an open pipe to
    EOF) and stdout (the JSON events) to a file it parses with `parse_events`."""

    model_config = ConfigDict(extra="forbid")

    files: list[GuestFile]
    prepare_argv: list[list[str]] = Field(default_factory=list)
    """Run once after upload, before `version_argv` (e.g. unpack the Gemini CLI tarball)."""
    env: dict[str, str]
    run_argv: list[str]
    resume_argv: list[str]
    version_argv: list[str]
    mcp_server: McpServerSpec


class TurnOutcome(BaseModel):
    """How one CLI invocation ended, read from its event stream (never from its exit code)."""

    model_config = ConfigDict(extra="forbid")

    final_message: str | None = None
    protocol_word: ProtocolWord | None = None
    succeeded: bool = False
    refused_budget: bool = False
    error: str | None = None
    tool_calls: int = 0
    session_id: str | None = None
    turns: list[dict] = Field(default_factory=list)
    """Normalised trace items in order: {"kind": "message"|"reasoning"|"tool_call"|"error"|"usage", ...}."""


@dataclass(frozen=True)
class Transcript:
    """A guest file where a CLI keeps the whole conversation of a session, read as evidence when its event
    stream lacks the model's tool calls."""

    guest_path: str
    parse: Callable[[str], list[list[dict]]]
    """Its text to trace items (the kinds of `TurnOutcome.turns`), one list per turn (per prompt sent)."""


class AgentAdapter(Protocol):
    cli: AgentCli
    """What is known about the CLI apart from how it runs: name, provider, default model and effort, the files
    it uploads and how they are fetched, the configuration it would inherit."""

    def plan(self, ctx: AgentContext, artifact_dir: Path, binary: Path | None = None) -> AgentPlan:
        """`binary` is the CLI to upload (agent_binary); default its file in `artifact_dir`."""
        ...

    def parse_events(self, text: str) -> TurnOutcome: ...

    def transcript(self, ctx: AgentContext) -> Transcript | None:
        """Where the CLI keeps the conversation, when its events do not show every tool call; else None."""
        ...


def require_artifacts(cli: AgentCli, artifact_dir: Path, binary: Path | None = None) -> dict[str, Path]:
    """The files the plan uploads by artifact name: the CLI (the first artifact) from `binary` when given, the
    rest from `artifact_dir`. A missing one is a configuration error, raised before anything is rendered."""
    files = {artifact.name: artifact_dir / artifact.name for artifact in cli.artifacts}
    if binary is not None:
        files[cli.artifacts[0].name] = binary
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise ConfigurationError(f"agent artifacts missing: {', '.join(missing)} (run `make agents`, or fix "
                                 "agent_binary / artifact_dir)")
    return files


def mcp_server(ctx: AgentContext, *, max_screenshot_width: int | None = None) -> McpServerSpec:
    """computer-use as the CLI starts it; `max_screenshot_width` for providers that shrink large images
    themselves (the server then maps the model's coordinates back, the provider would not)."""
    args = ["--channels", ",".join(ctx.channels)]
    if ctx.code_mode:
        args.append("--code-mode")
    if max_screenshot_width:
        args += ["--max-screenshot-width", str(max_screenshot_width)]
    env = dict(ctx.desktop_env)
    if ctx.call_log_dir:
        env[CALL_LOG_ENV] = ctx.call_log_dir
    return McpServerSpec(command=ctx.computer_use_path, args=args, env=env)


def protocol_word(message: str | None) -> ProtocolWord | None:
    """The runner protocol word the final message ends with, where the protocol puts it: the message's last
    word, or alone on its last line (markdown emphasis or a full stop around it tolerated). A word elsewhere
    ("Done; no need for TASK_INFEASIBLE.") is not one."""
    text = (message or "").rstrip().rstrip("*_`")
    if not text:
        return None
    last_line = text.splitlines()[-1].strip().strip("*_`.")
    for word in PROTOCOL_WORDS:
        before = text[: -len(word)].rstrip("*_`")
        at_end = text.endswith(word) and not (before and (before[-1].isalnum() or before[-1] == "_"))
        if at_end or last_line == word:
            return word
    return None


def is_budget_refusal(text: str) -> bool:
    """The gateway refuses over-budget calls with 402/403 naming `max_model_calls`."""
    return "max_model_calls" in text

