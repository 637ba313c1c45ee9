"""Client mode of the artifact (`computer-use probe --spec JSON`), run inside the guest.

Starts the configured server the way the agent CLI will (command, args, env over stdio), initializes with
the protocol version that CLI sends, lists tools and reads apps/observe/find/screenshot. Prints ONE JSON
line: each step with its timing and error, plus the raw evidence; the host judges the evidence.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any

import anyio
from mcp import StdioServerParameters, types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import channels as ch
from .call_log import ENV_DIR


class ProbeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    channels: list[str]
    protocol_version: str = "2025-11-25"
    limit_sec: float = Field(default=85.0, gt=0)


class Steps:
    """The JSON report under construction: one entry per step, evidence beside it."""

    def __init__(self) -> None:
        self.report: dict[str, Any] = {"steps": [], "evidence": {}}

    def add(self, name: str, started: float, error: str | None = None, **facts: Any) -> None:
        self.report["steps"].append({"name": name, "seconds": round(time.monotonic() - started, 3),
                                     "error": error, **facts})


def _text(result: types.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def _call(session: ClientSession, steps: Steps, name: str, args: dict) -> types.CallToolResult | None:
    started = time.monotonic()
    try:
        result = await session.call_tool(name, args)
    except Exception as exc:  # noqa: BLE001 - a transport failure is this step's finding
        steps.add(name, started, f"{type(exc).__name__}: {exc}", arguments=args)
        return None
    steps.add(name, started, _text(result)[:500] if result.is_error else None, arguments=args)
    return None if result.is_error else result


async def initialize(session: ClientSession, version: str) -> types.InitializeResult:
    """Handshake asking for `version`: the SDK's own initialize() always asks for its newest version,
    while the agent CLIs ask for theirs (2025-06-18 or 2025-11-25)."""
    result = await session.send_request(
        types.InitializeRequest(params=types.InitializeRequestParams(
            protocol_version=version, capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="hcu-mcp-probe", version="1"))),
        types.InitializeResult,
    )
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())
    return result


async def _a11y(session: ClientSession, steps: Steps) -> None:
    apps = await _call(session, steps, "apps", {})
    if apps is None:
        return
    listing = json.loads(_text(apps))
    steps.report["evidence"]["apps"] = listing
    windows = [w for app in listing for w in app["windows"] if "showing" in w.get("states", [])]
    if not windows:
        return  # empty desktop: nothing to observe; the host records observe/find as skipped
    window = windows[0]["id"]
    observed = await _call(session, steps, "observe", {"element": window, "max_nodes": 60})
    if observed is None:
        return
    tree = json.loads(_text(observed))
    steps.report["evidence"]["observe"] = tree
    named = [node for node in tree["nodes"] if node["name"]]
    criterion = {"name": named[-1]["name"]} if named else {"role": tree["nodes"][0]["role"]}
    query = {"within": window, **criterion}
    found = await _call(session, steps, "find", query)
    if found is not None:
        steps.report["evidence"]["find"] = json.loads(_text(found))


async def _gui(session: ClientSession, steps: Steps) -> None:
    shot = await _call(session, steps, "screenshot", {"format": "png"})
    if shot is None:
        return
    images = [item for item in shot.content if isinstance(item, types.ImageContent)]
    steps.report["evidence"]["screenshot"] = {
        "mime_type": images[0].mime_type if images else None,
        "png_b64": images[0].data if images else "",
        "line": _text(shot),
    }
    if shutil.which("xdotool"):  # the screen size from X itself, independent of the server's capture
        out = subprocess.run(["xdotool", "getdisplaygeometry"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and len(out.stdout.split()) == 2:
            steps.report["evidence"]["display_size"] = [int(v) for v in out.stdout.split()]


async def probe(spec: ProbeSpec) -> dict[str, Any]:
    steps = Steps()
    report = steps.report
    report["protocol_requested"] = spec.protocol_version
    # Without the call log: the probe's calls are not the agent's.
    env = {key: value for key, value in spec.env.items() if key != ENV_DIR}
    params = StdioServerParameters(command=spec.command, args=spec.args, env=env)
    started = time.monotonic()
    try:
        with anyio.fail_after(spec.limit_sec):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                init = await initialize(session, spec.protocol_version)
                report["protocol_negotiated"] = init.protocol_version
                steps.add("initialize", started)
                started = time.monotonic()
                listed = await session.list_tools()
                report["tools"] = [tool.name for tool in listed.tools]
                steps.add("tools", started)
                if ch.A11Y in spec.channels:
                    await _a11y(session, steps)
                if ch.GUI in spec.channels:
                    await _gui(session, steps)
    except TimeoutError:
        report["fatal"] = f"probe exceeded {spec.limit_sec:g} s"
    except Exception as exc:  # noqa: BLE001 - whatever stopped the session is the finding
        report["fatal"] = f"{type(exc).__name__}: {exc}"
    return report


def run_probe_cli(spec_json: str) -> int:
    try:
        spec = ProbeSpec.model_validate_json(spec_json)
    except ValidationError as exc:
        first = exc.errors()[0]
        print(f"computer-use probe: bad --spec: {first['loc']}: {first['msg']}", file=sys.stderr)
        return 2
    report = anyio.run(probe, spec)
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    return 0 if "fatal" not in report else 1
