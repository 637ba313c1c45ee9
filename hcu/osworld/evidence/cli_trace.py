"""What the agent CLI showed of the conversation, turn by turn: the model's words and reasoning, and its tool
calls as the CLI named them with the results it reported. Read from each turn's kept event stream, or from
the CLI's own transcript where the stream lacks the tool calls (`AgentAdapter.transcript`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hcu.osworld.agents.base import MCP_SERVER_NAME, AgentAdapter
from hcu.osworld.records.layout import TURN_EVENTS

TURN_NUMBER = re.compile(re.escape(TURN_EVENTS).replace(r"\{turn\}", r"(\d+)"))


@dataclass
class CliCall:
    call_id: str
    function_name: str
    """As the CLI offered it to the model (`mcp__cu__click`, `mcp_cu_click`, `use_tool`)."""
    arguments: dict[str, Any]
    tool: str | None
    """The computer-use tool it reached; None for one of the CLI's own tools."""
    tool_arguments: dict[str, Any]
    result: Any = None
    """What the CLI reported back (its own rendering, clipped in the trace)."""
    error: bool = False
    seen_by_cli: bool = True
    """False for a call only computer-use recorded (named by its tool then)."""


@dataclass
class CliItem:
    kind: Literal["message", "reasoning", "call", "error"]
    text: str = ""
    call: CliCall | None = None


@dataclass
class CliTurn:
    number: int
    items: list[CliItem] = field(default_factory=list)
    ended_at: float | None = None
    """Host time the runner kept the turn's events (the file's modification time): after its last generation."""
    session_id: str | None = None
    """The CLI's own id of the session (Codex's thread id), when its events name one."""


def read_turns(result_dir: Path, adapter: AgentAdapter,
               transcript: list[list[dict]] | None = None) -> list[CliTurn]:
    """Every turn the result folder kept, or the turns of the CLI's parsed `transcript` when there is one."""
    files = sorted((int(m.group(1)), p) for p in result_dir.glob(TURN_EVENTS.format(turn="*"))
                   if (m := TURN_NUMBER.fullmatch(p.name)))
    outcomes = [adapter.parse_events(path.read_text(errors="replace")) for _, path in files]
    per_turn = transcript if transcript is not None else [outcome.turns for outcome in outcomes]
    numbers = [number for number, _ in files] or [1]
    turns = []
    for index, items in enumerate(per_turn):
        number = numbers[index] if index < len(numbers) else numbers[-1] + index - len(numbers) + 1
        kept = files[index][1].stat().st_mtime if index < len(files) else None
        session = outcomes[index].session_id if index < len(outcomes) else None
        turns.append(CliTurn(number, cli_items(items, number), kept, session))
    return turns


def cli_items(trace: list[dict], turn: int) -> list[CliItem]:
    """Normalised trace items (events.EventLog) as messages, reasoning, calls (their results joined) and errors.
    A call the CLI gave no id is named by its turn and place."""
    items: list[CliItem] = []
    calls: dict[str, CliCall] = {}
    for entry in trace:
        kind = entry.get("kind")
        if kind in ("message", "reasoning", "error"):
            items.append(CliItem(kind, str(entry.get("text") or "")))
        elif kind == "tool_call":
            call = cli_call(entry, f"turn-{turn}-call-{len(calls) + 1}")
            items.append(CliItem("call", call=call))
            calls[call.call_id] = call
        elif kind == "tool_result":
            call = calls.get(str(entry.get("call_id"))) or _last_open_call(items)
            if call is not None:
                call.result, call.error = entry.get("result"), bool(entry.get("is_error"))
    return items


def cli_call(entry: dict, default_id: str) -> CliCall:
    name, arguments = str(entry.get("name")), entry.get("arguments")
    if entry.get("server"):  # Codex names the server and the tool apart (its namespace `mcp__<server>`)
        name = f"mcp__{entry['server']}__{name}"
    if not isinstance(arguments, dict):
        arguments = {} if arguments is None else {"input": arguments}
    reached = computer_use_tool(name, arguments)
    failed = bool(entry.get("error")) or entry.get("status") == "failed"
    return CliCall(call_id=str(entry.get("call_id") or default_id), function_name=name, arguments=arguments,
                   tool=reached[0] if reached else None, tool_arguments=reached[1] if reached else {},
                   result=entry.get("error") or entry.get("result"), error=failed)


def computer_use_tool(name: str, arguments: dict[str, Any],
                      server: str = MCP_SERVER_NAME) -> tuple[str, dict[str, Any]] | None:
    """The computer-use tool and arguments behind a CLI's call: `mcp__cu__<tool>` (Codex, Claude Code),
    `mcp_cu_<tool>` (Gemini CLI), `use_tool{tool_name: cu__<tool>, tool_input}` (Grok Build)."""
    for prefix in (f"mcp__{server}__", f"mcp_{server}_"):
        if name.startswith(prefix):
            return name[len(prefix):], arguments
    target = str(arguments.get("tool_name") or "")
    if name == "use_tool" and target.startswith(f"{server}__"):
        tool_input = arguments.get("tool_input")
        return target[len(server) + 2:], tool_input if isinstance(tool_input, dict) else {}
    return None


def _last_open_call(items: list[CliItem]) -> CliCall | None:
    open_calls = [i.call for i in items if i.call is not None and i.call.result is None]
    return open_calls[-1] if open_calls else None
