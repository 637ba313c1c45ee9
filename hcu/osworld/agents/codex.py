"""Codex (`codex exec`) inside the guest: config.toml in a fresh CODEX_HOME, base instructions through
`model_instructions_file`, the profile as `$CODEX_HOME/AGENTS.md`, MCP-only tools."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from pathlib import Path

import orjson
import tomli_w

from hcu.gateway.descriptors import OPENAI
from hcu.osworld.agents.base import (
    MCP_SERVER_NAME,
    RESUME_PROMPT,
    AgentContext,
    AgentPlan,
    GuestFile,
    TurnOutcome,
    mcp_server,
    require_artifacts,
)
from hcu.osworld.agents.declaration import AgentCli, Artifact
from hcu.osworld.agents.events import EventLog

TOKEN_ENV = "HCU_GATEWAY_TOKEN"
CATALOG_TEMPLATE_MODEL = "gpt-5.5"
# Everything but MCP: Codex's own shell/patch/image/agent tools (verified MCP-only set in the notes), plus
# its built-in computer/browser use and hooks (on by default in 0.171's `codex features list`).
DISABLED_FEATURES = ("plugins", "shell_tool", "unified_exec", "view_image", "goals", "image_generation",
                     "apps", "tool_suggest", "computer_use", "browser_use", "hooks")


CODEX = AgentCli(
    name="codex", provider=OPENAI, model="gpt-5.5", effort="xhigh",
    # the static musl binary of the linux-x64 platform package
    artifacts=(Artifact(name="codex", source="npm", package="@openai/codex@{version}-linux-x64", version="0.171.0",
                        member="package/vendor/x86_64-unknown-linux-musl/bin/codex"),),
    # its override file and skills folder (.agents/skills) are read by default too
    inherited_paths=(".codex", "AGENTS.md", "AGENTS.override.md", ".agents"),
    managed_config=("/etc/codex",),
)


class CodexAdapter:
    cli = CODEX

    def plan(self, ctx: AgentContext, artifact_dir: Path, binary: Path | None = None) -> AgentPlan:
        binary = require_artifacts(self.cli, artifact_dir, binary)["codex"]
        home = ctx.path("home", "codex")
        exe = ctx.path("bin", "codex")
        base_md = ctx.path("instructions", "base.md")
        catalog = f"{home}/model-catalog.json"
        files = [
            GuestFile(guest_path=exe, host_path=binary, mode=0o755),
            GuestFile(guest_path=base_md, data=ctx.base_instructions.encode()),
            GuestFile(guest_path=f"{home}/config.toml", data=render_config(ctx, base_md, catalog).encode()),
            GuestFile(guest_path=catalog, data=orjson.dumps(model_catalog(binary, ctx.model))),
        ]
        if ctx.profile_instructions:
            files.append(GuestFile(guest_path=f"{home}/AGENTS.md", data=ctx.profile_instructions.encode()))
        common = ["--json", "--skip-git-repo-check", "--strict-config"]
        return AgentPlan(
            files=files,
            env={"CODEX_HOME": home, TOKEN_ENV: ctx.gateway_token},
            run_argv=[exe, "exec", *common, ctx.prompt],
            # CODEX_HOME is fresh per task, so the most recent session is this task's (ids are Codex's own).
            resume_argv=[exe, "exec", "resume", "--last", *common, RESUME_PROMPT],
            version_argv=[exe, "--version"],
            mcp_server=mcp_server(ctx),
        )

    def parse_events(self, text: str) -> TurnOutcome:
        return parse_codex_events(text)

    def transcript(self, ctx: AgentContext) -> None:
        return None  # the event stream shows every tool call


def render_config(ctx: AgentContext, base_md: str, catalog: str) -> str:
    server = mcp_server(ctx)
    config = {
        "model": ctx.model,
        "model_provider": "hcu_gateway",
        "model_reasoning_effort": ctx.effort,
        "model_instructions_file": base_md,
        "model_catalog_json": catalog,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        "project_doc_max_bytes": 0,  # no AGENTS.md from the working directory; $CODEX_HOME/AGENTS.md stays
        "web_search": "disabled",
        "features": {name: False for name in DISABLED_FEATURES},
        "agents": {"enabled": False},  # sub-agent tools ([features].multi_agent is deprecated in 0.171)
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "skills": {"bundled": {"enabled": False}},
        "model_providers": {"hcu_gateway": {
            "name": "hcu gateway",
            "base_url": ctx.scoped_url("/v1"),
            "env_key": TOKEN_ENV,
            "wire_api": "responses",
            "http_headers": {"X-Task-Id": ctx.scope},
            # The gateway owns backoff. One retry covers a refused connection; stream retries stay off
            # because Codex re-sends a 402/403 budget refusal once per stream retry (seen on the wire).
            "request_max_retries": 1,
            "stream_max_retries": 0,
            "stream_idle_timeout_ms": 300_000,
        }},
        "mcp_servers": {MCP_SERVER_NAME: {
            "command": server.command,
            "args": server.args,
            "env": server.env,
            "env_vars": ["XAUTHORITY"],  # Codex hands MCP children a filtered environment
            "startup_timeout_sec": 60,
            "tool_timeout_sec": 600,
            "required": True,
            "default_tools_approval_mode": "approve",
        }},
    }
    return tomli_w.dumps(config)


def model_catalog(binary: Path, model: str) -> dict:
    """A one-entry catalog for `model`: the bundled entry (or gpt-5.5's, renamed) with MCP tools offered
    directly (`supports_search_tool` would hide them behind tool_search) and no apply_patch tool."""
    bundled = {m["slug"]: m for m in _bundled_models(str(binary), os.stat(binary).st_mtime_ns)}
    entry = dict(bundled.get(model) or bundled[CATALOG_TEMPLATE_MODEL])
    entry.update(slug=model, supports_search_tool=False, apply_patch_tool_type=None, upgrade=None)
    if model not in bundled:
        entry["display_name"] = model
    return {"models": [entry]}


@functools.lru_cache(maxsize=4)
def _bundled_models(binary: str, _mtime_ns: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="hcu-codex-home-") as home:
        out = subprocess.run([binary, "debug", "models", "--bundled"], env={"CODEX_HOME": home},
                             capture_output=True, timeout=60, check=True, stdin=subprocess.DEVNULL)
    return orjson.loads(out.stdout)["models"]


def parse_codex_events(text: str) -> TurnOutcome:
    log = EventLog()
    for event in log.lines(text):
        kind = event.get("type")
        if kind == "thread.started":
            log.session_id = event.get("thread_id")
        elif kind in ("item.completed", "item.started"):
            _item(log, event.get("item") or {}, completed=kind == "item.completed")
        elif kind == "turn.completed":
            log.usage(event.get("usage"))
            log.finish(succeeded=True)
        elif kind == "turn.failed":
            log.finish(succeeded=False, error=((event.get("error") or {}).get("message") or "turn failed"))
        elif kind == "error":
            log.note_error(str(event.get("message", "")))
    return log.outcome()


def _item(log: EventLog, item: dict, *, completed: bool) -> None:
    kind = item.get("type")
    if not completed:
        return
    if kind == "agent_message":
        log.message(item.get("text") or "")
    elif kind == "reasoning":
        log.reasoning(item.get("text") or "")
    elif kind == "mcp_tool_call":
        log.tool_call(name=str(item.get("tool")), arguments=item.get("arguments"), result=item.get("result"),
                      error=item.get("error"), status=item.get("status"), server=item.get("server"))
    elif kind == "command_execution":
        log.tool_call(name="command_execution", arguments=item.get("command"),
                      result=item.get("aggregated_output"), status=item.get("status"))
    elif kind == "error":
        log.note_error(str(item.get("message", "")))
