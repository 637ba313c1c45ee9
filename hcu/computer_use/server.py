"""Build the MCP server with the tools of the enabled channels and serve it over stdio."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import channels as ch
from .recorder import Recorder
from .screen import ScreenState

INSTRUCTIONS = (
    "Desktop control for a computer-use agent. Coordinates are pixels of the last screenshot. "
    "Accessibility element ids come from apps/observe/find."
)


class ComputerUseServer(MCPServer):
    """MCPServer that refuses unknown argument names: the SDK drops them silently, so a misspelt
    argument (`X` for `x`) would otherwise run the tool with its defaults. With a `recorder`, every call
    (refused ones too) goes into the call log."""

    recorder: Recorder | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self.recorder is None:
            return await self._checked_call(name, arguments, context)
        return await self.recorder.around(name, arguments, lambda: self._checked_call(name, arguments, context))

    async def _checked_call(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is not None:
            known = set(tool.input_schema.get("properties", {}))
            unknown = sorted(set(arguments) - known)
            if unknown:
                expected = ", ".join(sorted(known)) or "no arguments"
                raise ToolError(f"{name}: unknown argument {unknown[0]!r}; expected {expected}")
        return await super().call_tool(name, arguments, context)


def build_server(channels: tuple[str, ...], *, max_screenshot_width: int | None = None,
                 recorder: Recorder | None = None) -> ComputerUseServer:
    """The server listing exactly the tools of `channels` (see channels.TOOLS_BY_CHANNEL), recording its calls
    with `recorder` when given."""
    server = ComputerUseServer(
        name="computer-use", instructions=INSTRUCTIONS, version="1", log_level="WARNING")
    server.recorder = recorder
    # Imported per channel so a guest without a channel's dependencies still serves the others.
    if ch.GUI in channels:
        from . import tools_gui

        tools_gui.register(server, ScreenState(), max_screenshot_width)
    if ch.KEYBOARD in channels:
        from . import tools_keyboard

        tools_keyboard.register(server)
    if ch.A11Y in channels:
        from . import tools_a11y
        from .atspi_tree import Tree

        tools_a11y.register(server, Tree())
    if ch.CODE in channels:
        from . import tools_code

        tools_code.register(server)
    return server
