"""Claude Code (`claude -p`) inside the guest: environment-only gateway setup, a fresh CLAUDE_CONFIG_DIR,
`--bare` with only the computer-use MCP server, base prompt via `--system-prompt-file` and the profile
appended with `--append-system-prompt-file`; `dontAsk` + `--allowedTools mcp__cu__*` (works as root)."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.gateway.descriptors import ANTHROPIC
from hcu.osworld.agents.base import (
    MCP_SERVER_NAME,
    RESUME_PROMPT,
    AgentContext,
    AgentPlan,
    GuestFile,
    McpServerSpec,
    TurnOutcome,
    mcp_server,
    require_artifacts,
)
from hcu.osworld.agents.declaration import AgentCli, Artifact
from hcu.osworld.agents.events import EventLog

CLAUDE_SCREENSHOT_WIDTH = 1280
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # else a HEAD <base>/api/hello first
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",  # no billing-header system block
    # The gateway owns backoff; one retry covers a dropped connection. No stream:false re-send of a failed
    # stream: it would be a second generation for the same turn.
    "CLAUDE_CODE_MAX_RETRIES": "1",
    "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1",
    "MCP_TIMEOUT": "60000",
    "MCP_TOOL_TIMEOUT": "600000",
}


CLAUDE_CODE = AgentCli(
    name="claude-code", provider=ANTHROPIC, model="claude-opus-5", effort="xhigh",
    # the native binary of the platform package (the top-level npm stub needs its postinstall script)
    artifacts=(Artifact(name="claude-code", source="npm", package="@anthropic-ai/claude-code-linux-x64@{version}",
                        version="2.1.332", member="package/claude"),),
    # with the local memory file and the project's MCP servers
    inherited_paths=(".claude", ".claude.json", "CLAUDE.md", "CLAUDE.local.md", ".mcp.json"),
    managed_config=("/etc/claude-code",),
)


class ClaudeCodeAdapter:
    cli = CLAUDE_CODE

    def plan(self, ctx: AgentContext, artifact_dir: Path, binary: Path | None = None) -> AgentPlan:
        uploads = require_artifacts(self.cli, artifact_dir, binary)
        exe = ctx.path("bin", "claude")
        home = ctx.path("home", "claude")
        base_md = ctx.path("instructions", "base.md")
        profile_md = ctx.path("instructions", "profile.md")
        mcp_json = ctx.path("config", "claude-mcp.json")
        files = [
            GuestFile(guest_path=exe, host_path=uploads["claude-code"], mode=0o755),
            GuestFile(guest_path=base_md, data=ctx.base_instructions.encode()),
            GuestFile(guest_path=mcp_json, data=render_mcp_config(ctx)),
        ]
        flags = [
            "--output-format", "stream-json", "--verbose",
            "--model", ctx.model, "--effort", ctx.effort,
            "--bare", "--system-prompt-file", base_md,
            "--mcp-config", mcp_json, "--strict-mcp-config", "--tools", "",
            "--permission-mode", "dontAsk", "--allowedTools", f"mcp__{MCP_SERVER_NAME}__*",
        ]
        if ctx.profile_instructions:
            files.append(GuestFile(guest_path=profile_md, data=ctx.profile_instructions.encode()))
            flags += ["--append-system-prompt-file", profile_md]
        env = {
            "ANTHROPIC_BASE_URL": ctx.scoped_url(),
            "ANTHROPIC_AUTH_TOKEN": ctx.gateway_token,
            "ANTHROPIC_CUSTOM_HEADERS": f"X-Task-Id: {ctx.scope}",
            "CLAUDE_CONFIG_DIR": home,
            **QUIET_ENV,
        }
        return AgentPlan(
            files=files,
            env=env,
            run_argv=[exe, "-p", ctx.prompt, "--session-id", ctx.session_id, *flags],
            # The transcript lives under CLAUDE_CONFIG_DIR/projects/<cwd>: same dir and cwd resume it.
            resume_argv=[exe, "-p", RESUME_PROMPT, "--resume", ctx.session_id, *flags],
            version_argv=[exe, "--version"],
            mcp_server=claude_mcp_server(ctx),
        )

    def parse_events(self, text: str) -> TurnOutcome:
        return parse_claude_events(text)

    def transcript(self, ctx: AgentContext) -> None:
        return None  # the event stream shows every tool call


def claude_mcp_server(ctx: AgentContext) -> McpServerSpec:
    """Anthropic's API shrinks images whose long side exceeds 1568 px, so clicks read off a full 1920x1080
    screenshot would land in the wrong place: computer-use downscales to 1280 and maps coordinates back."""
    return mcp_server(ctx, max_screenshot_width=CLAUDE_SCREENSHOT_WIDTH)


def render_mcp_config(ctx: AgentContext) -> bytes:
    server = claude_mcp_server(ctx)
    return orjson.dumps({"mcpServers": {MCP_SERVER_NAME: {
        "type": "stdio", "command": server.command, "args": server.args, "env": server.env,
    }}}, option=orjson.OPT_INDENT_2)


def parse_claude_events(text: str) -> TurnOutcome:
    log = EventLog()
    for event in log.lines(text):
        kind, subtype = event.get("type"), event.get("subtype")
        if event.get("session_id"):
            log.session_id = event["session_id"]
        if kind == "assistant" and event.get("is_api_error_message"):
            # a synthetic message carrying the API error ("API Error: ... (429)"), not the model's words
            log.note_error(" ".join(b.get("text", "") for b in _blocks(event.get("message"))))
        elif kind == "assistant":
            _assistant(log, event.get("message") or {})
        elif kind == "user":
            for block in _blocks(event.get("message")):
                if block.get("type") == "tool_result":
                    log.tool_result(call_id=block.get("tool_use_id"), result=block.get("content"),
                                    is_error=bool(block.get("is_error")))
        elif kind == "system" and subtype == "api_retry":
            log.note_error(f"api_retry {event.get('attempt')}/{event.get('max_retries')}: "
                           f"status {event.get('error_status')}")
        elif kind == "result":
            log.usage(event.get("usage"))
            failed = bool(event.get("is_error")) or subtype != "success"
            status = event.get("api_error_status")
            detail = f"{subtype}: status {status}: {event.get('result') or ''}"
            log.finish(succeeded=not failed, error=detail if failed else None)
    return log.outcome()


def _assistant(log: EventLog, message: dict) -> None:
    texts: list[str] = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
            continue
        if any(texts):  # in the message's own order: the words before a call come before it
            log.message("".join(texts))
        texts = []
        if kind == "thinking":
            log.reasoning(block.get("thinking") or "")
        elif kind == "tool_use":
            log.tool_call(name=str(block.get("name")), arguments=block.get("input"), call_id=block.get("id"))
    if any(texts):
        log.message("".join(texts))


def _blocks(message: object) -> list[dict]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
