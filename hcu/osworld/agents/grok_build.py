"""Grok Build (`grok -p`) inside the guest: config.toml in a fresh GROK_HOME (Responses backend at the
gateway, compatibility imports of Claude/Cursor config off), the whole system prompt through
`--system-prompt-override` (base + profile), MCP tools only via `search_tool`/`use_tool`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import orjson
import tomli_w

from hcu.gateway.descriptors import OPENAI
from hcu.osworld.agents.base import (
    MCP_SERVER_NAME,
    RESUME_PROMPT,
    AgentContext,
    AgentPlan,
    GuestFile,
    Transcript,
    TurnOutcome,
    mcp_server,
    require_artifacts,
)
from hcu.osworld.agents.declaration import AgentCli, Artifact
from hcu.osworld.agents.events import EventLog

TOKEN_ENV = "HCU_GATEWAY_TOKEN"
MODEL_KEY = "hcu"
COMPAT_OFF = {"skills": False, "rules": False, "agents": False, "mcps": False, "hooks": False}


GROK_BUILD = AgentCli(
    name="grok-build", provider=OPENAI, model="grok-4.7", effort="xhigh",
    artifacts=(Artifact(name="grok", source="pypi", package="grok-cli-bin=={version}", version="0.2.111",
                        member="grok_cli_bin/bin/grok"),),
    # with its Cursor and Claude compatibility imports
    inherited_paths=(".grok", ".cursor", ".claude"),
    managed_config=("/etc/grok",),
)


class GrokBuildAdapter:
    cli = GROK_BUILD

    def plan(self, ctx: AgentContext, artifact_dir: Path, binary: Path | None = None) -> AgentPlan:
        uploads = require_artifacts(self.cli, artifact_dir, binary)
        exe = ctx.path("bin", "grok")
        home = ctx.path("home", "grok")
        files = [
            GuestFile(guest_path=exe, host_path=uploads["grok"], mode=0o755),
            GuestFile(guest_path=f"{home}/config.toml", data=render_config(ctx).encode()),
        ]
        flags = [
            "--output-format", "streaming-json", "--always-approve", "--no-auto-update",
            "-m", MODEL_KEY, "--effort", ctx.effort,
            "--system-prompt-override", ctx.instructions_text,
            "--tools", "search_tool,use_tool", "--disallowed-tools", "Agent",
            "--disable-web-search", "--no-subagents", "--no-memory", "--no-plan",
        ]
        return AgentPlan(
            files=files,
            env={"GROK_HOME": home, TOKEN_ENV: ctx.gateway_token},
            run_argv=[exe, "-p", ctx.prompt, "--session-id", ctx.session_id, *flags],
            resume_argv=[exe, "-p", RESUME_PROMPT, "--resume", ctx.session_id, *flags],
            version_argv=[exe, "--version"],
            mcp_server=mcp_server(ctx),
        )

    def parse_events(self, text: str) -> TurnOutcome:
        return parse_grok_events(text)

    def transcript(self, ctx: AgentContext) -> Transcript:
        """Grok's stream has no tool calls; its session folder (per working directory, the agent runs in the
        user's home) keeps the chat history with them."""
        folder = f"{ctx.path('home', 'grok')}/sessions/{quote(ctx.guest_home, safe='')}/{ctx.session_id}"
        return Transcript(guest_path=f"{folder}/chat_history.jsonl", parse=parse_grok_chat)


def render_config(ctx: AgentContext) -> str:
    server = mcp_server(ctx)
    config = {
        "cli": {"auto_update": False},
        "features": {"telemetry": False, "feedback": False, "remote_fetch": False},
        "telemetry": {"trace_upload": False, "mixpanel_enabled": False},
        # The gateway owns backoff; Grok otherwise retries 5xx up to 15 times.
        "models": {"default": MODEL_KEY, "max_retries": 1, "default_reasoning_effort": ctx.effort},
        "model": {MODEL_KEY: {
            "model": ctx.model,
            "base_url": ctx.scoped_url("/v1"),
            "env_key": TOKEN_ENV,
            "api_backend": "responses",
            "supports_reasoning_effort": True,  # else --effort is silently dropped
            "context_window": 200_000,
            "extra_headers": {"X-Task-Id": ctx.scope},
        }},
        "mcp_servers": {MCP_SERVER_NAME: {"command": server.command, "args": server.args, "env": server.env}},
        "compat": {"claude": dict(COMPAT_OFF), "cursor": dict(COMPAT_OFF)},
    }
    return tomli_w.dumps(config)


def parse_grok_events(text: str) -> TurnOutcome:
    """Grok 0.2.111's streaming-json carries only `text` pieces, then `end` or `error` (tool calls are not
    in the stream, so `tool_calls` stays 0; `end.num_turns` counts model calls and is kept with the usage)."""
    log = EventLog()
    for event in log.lines(text):
        kind = event.get("type")
        log.session_id = event.get("sessionId") or log.session_id
        if kind == "text":
            log.text_delta(str(event.get("data") or ""))
        elif kind == "end":
            log.usage({**(event.get("usage") or {}), "num_turns": event.get("num_turns")})
            reason = str(event.get("stopReason") or "")
            ok = reason.replace("_", "").lower() in ("endturn", "stop", "")  # seen: "EndTurn"
            log.finish(succeeded=ok, error=None if ok else f"stopReason {reason}")
        elif kind == "error":
            log.finish(succeeded=False, error=str(event.get("message") or event))
    return log.outcome()


def parse_grok_chat(text: str) -> list[list[dict]]:
    """Grok 0.2.111's chat_history.jsonl as trace items per prompt: the assistant's words (and reasoning, when
    kept), its `use_tool` calls and their results. Context it adds itself (system reminders, images it extracts
    from tool results) is not the model's and is left out."""
    turns: list[list[dict]] = []
    log = EventLog()
    for entry in log.lines(text):
        kind = entry.get("type")
        if kind == "user" and "prompt_index" in entry:
            if turns or log.items:
                turns.append(log.outcome().turns)
            log = EventLog()
        elif kind == "assistant":
            log.reasoning(str(entry.get("reasoning_content") or ""))
            log.message(str(entry.get("content") or ""))
            for call in entry.get("tool_calls") or []:
                log.tool_call(name=str(call.get("name")), arguments=_json_arguments(call.get("arguments")),
                              call_id=call.get("id"))
        elif kind == "tool_result":
            log.tool_result(call_id=entry.get("tool_call_id"), result=entry.get("content"))
    turns.append(log.outcome().turns)
    return turns


def _json_arguments(raw: object) -> object:
    """Tool arguments as the model wrote them: a JSON object in a string (kept as the string if it is not one)."""
    if not isinstance(raw, str):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
