"""A scripted policy: a model stand-in that solves (or fails) a task by calling computer-use tools.

Per task a `Policy` lists tool calls (by computer-use's plain tool names) and a final message. The responder
is stateless about progress: it finds the task by a `match` text in the conversation and the step by the
number of tool results already in it, so a resumed session carries on where it stopped. Tool calls are
rendered the way the calling CLI offers the tool (Codex namespace `mcp__cu`, Claude `mcp__cu__<tool>`,
Gemini `mcp_cu_<tool>`, Grok `use_tool{tool_name: "cu__<tool>"}`). Faults (429s, stream errors, cuts,
hangs) are scripted per step; only they keep a counter.

    python -m hcu.scripted.policy --policies FILE --host H --port P [--rate-limits FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hcu.scripted.replies import (
    CutStream,
    Hang,
    HttpFault,
    Reply,
    ScriptedRequest,
    StreamError,
    TextReply,
    ToolCall,
    ToolCallReply,
)
from hcu.scripted.upstream import ScriptedUpstream, build_app, limiter_from

SIDE_CALL_TEXT = "Desktop task"
"""Answer to a CLI's own side calls (session titles, summaries, routing): short and harmless."""


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, description="computer-use tool name, e.g. key, type, screenshot")
    arguments: dict[str, Any] = Field(default_factory=dict)
    say: str | None = Field(default=None, description="text the model writes along with the call")


class Fault(BaseModel):
    """Answer a generation request with a fault instead of the step (the step is not consumed)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["http", "stream_error", "cut", "hang"]
    status: int = 429
    retry_after: str | None = None
    stream_kind: Literal["rate_limit", "overloaded", "server"] = "rate_limit"
    at_step: int | None = Field(default=None, ge=0, description="step index it applies to; None = every step")
    times: int | None = Field(default=None, ge=1, description="first N requests at that step; None = always")
    until_text: str | None = Field(default=None, min_length=1,
                                   description="off once this text is in the conversation (a resume prompt)")
    body: dict[str, Any] | None = Field(default=None, description="http: this JSON body instead of the API's usual "
                                        "error body (e.g. a 429 insufficient_quota)")

    def reply(self) -> Reply:
        if self.kind == "http":
            return HttpFault(status=self.status, retry_after=self.retry_after, body=self.body)
        if self.kind == "stream_error":
            return StreamError(kind=self.stream_kind)
        if self.kind == "cut":
            return CutStream(after_events=2)
        return Hang()


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    match: str = Field(min_length=1, description="text that appears in the task's conversation (instruction)")
    steps: list[Step] = Field(default_factory=list)
    final_message: str = "Done.\nTASK_COMPLETE"
    never_finish: bool = False
    """After the steps, keep repeating them instead of answering (budget and no-progress tests)."""
    think_sec: float = Field(default=0.0, ge=0, le=600)
    """How long the model takes before each answer (benchmarks of a phase paced like a real model's)."""
    faults: list[Fault] = Field(default_factory=list)


class PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policies: dict[str, Policy] = Field(min_length=1)
    """Named policies; a config names the one to use per task."""
    server: str = "cu"
    """MCP server name the CLIs were given for computer-use."""
    unmatched_text: str = "I cannot identify this task.\nTASK_INFEASIBLE"

    @classmethod
    def load(cls, path: Path) -> PolicyFile:
        return cls.model_validate_json(path.read_bytes())


class PolicyResponder:
    """`Responder` for the scripted upstream: conversation in, the policy's next reply out."""

    def __init__(self, policies: PolicyFile) -> None:
        self.file = policies
        self._fault_hits: Counter[tuple[str, int, int]] = Counter()

    async def __call__(self, req: ScriptedRequest) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        if is_side_call(req, body):
            return TextReply(text=SIDE_CALL_TEXT)
        text = "\n".join(_strings(body))
        found = self.policy_for(text)
        if found is None:
            return TextReply(text=self.file.unmatched_text)
        name, policy = found
        await asyncio.sleep(policy.think_sec)
        step = tool_results(req.api, body)
        fault = self._fault(name, policy, step, text)
        if fault is not None:
            return fault
        index = step % len(policy.steps) if policy.never_finish and policy.steps else step
        if index >= len(policy.steps):
            return TextReply(text=policy.final_message)
        try:
            step = policy.steps[index]
            return ToolCallReply(calls=[self.render_call(req.api, body, step)], text=step.say)
        except LookupError as exc:  # shows up as the run's final message, without a protocol word
            return TextReply(text=f"scripted policy error: {exc}")

    def policy_for(self, text: str) -> tuple[str, Policy] | None:
        """The first policy whose `match` is in the conversation's text."""
        for name, policy in self.file.policies.items():
            if policy.match in text:
                return name, policy
        return None

    def _fault(self, name: str, policy: Policy, step: int, text: str) -> Reply | None:
        for i, fault in enumerate(policy.faults):
            if fault.at_step is not None and fault.at_step != step:
                continue
            if fault.until_text is not None and fault.until_text in text:
                continue
            key = (name, i, step)
            if fault.times is not None and self._fault_hits[key] >= fault.times:
                continue
            self._fault_hits[key] += 1
            return fault.reply()
        return None

    def render_call(self, api: str, body: dict, step: Step) -> ToolCall:
        """The step's tool as the calling CLI advertised it."""
        server, tool = self.file.server, step.tool
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        offered = dict(advertised_tools(api, body))
        if offered.get(tool) == f"mcp__{server}":  # Codex: a namespace of plain names
            return ToolCall(tool, step.arguments, call_id, extra={"namespace": f"mcp__{server}"})
        for name in (f"mcp__{server}__{tool}", f"mcp_{server}_{tool}", tool):
            if name in offered and offered[name] is None:
                return ToolCall(name, step.arguments, call_id)
        if "use_tool" in offered:  # Grok: MCP tools only through its use_tool indirection
            arguments = {"tool_name": f"{server}__{tool}", "tool_input": step.arguments}
            return ToolCall("use_tool", arguments, call_id)
        raise LookupError(f"the client offers no tool for {tool!r}; it offers {sorted(offered)}")


def is_side_call(req: ScriptedRequest, body: dict) -> bool:
    """A CLI's own bookkeeping call: Gemini's flash-lite router/summaries, Grok's forced session_title,
    anything without tools (titles, summaries)."""
    if req.api == "gemini" and "lite" in (req.model or ""):
        return True
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("function", "tool"):
        return True
    return not advertised_tools(req.api, body)


def advertised_tools(api: str, body: dict) -> list[tuple[str, str | None]]:
    """(name, namespace) of every tool the request offers."""
    tools = body.get("tools") or []
    out: list[tuple[str, str | None]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if api == "gemini":
            out += [(d.get("name"), None) for d in tool.get("functionDeclarations") or []]
        elif tool.get("type") == "namespace":
            out += [(t.get("name"), tool.get("name")) for t in tool.get("tools") or []]
        elif isinstance(tool.get("function"), dict):
            out.append((tool["function"].get("name"), None))
        elif tool.get("name"):
            out.append((tool["name"], None))
    return [(name, ns) for name, ns in out if name]


def tool_results(api: str, body: dict) -> int:
    """How many tool calls the conversation already holds answered (= the policy's step index)."""
    if api == "openai_responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        return sum(1 for i in items if isinstance(i, dict) and i.get("type", "").endswith("call_output"))
    if api == "openai_chat":
        return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
    if api == "anthropic":
        return sum(1 for m in body.get("messages") or [] if isinstance(m, dict)
                   for b in _blocks(m.get("content")) if b.get("type") == "tool_result")
    # Gemini: count the model's calls; a resumed Gemini CLI session repeats each functionResponse (seen
    # with 0.61.0), while every functionCall appears once.
    return sum(1 for c in body.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model"
               for p in c.get("parts") or [] if isinstance(p, dict) and "functionCall" in p)


def _blocks(content: Any) -> list[dict]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hcu.scripted.policy")
    parser.add_argument("--policies", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--rate-limits", type=Path, help="per-deployment quotas to enforce (scripted/rate_limits.py)")
    args = parser.parse_args(argv)
    try:
        policies = PolicyFile.load(args.policies)
    except (OSError, ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"--policies: {args.policies}: expected a policy JSON file ({first})", file=sys.stderr)
        return 2
    app = build_app(state=ScriptedUpstream(PolicyResponder(policies), limiter_from(args.rate_limits)))
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
