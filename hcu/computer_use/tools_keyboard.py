"""The keyboard channel: text entry and key combos to the focused window."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

from . import xinput
from .runtime import limited

TYPE_LIMIT_SEC = 300.0
"""20,000 ASCII characters at 12 ms, or 1,500 distinct non-ASCII ones (a 0.5 s pause per 18: keymap.py), fit
with room to spare."""
KEYS_HELP = (
    "xdotool combos pressed in order, e.g. ['ctrl+s'] or ['Down', 'Return']; "
    "names: Return, Tab, Escape, BackSpace, Delete, Up, Page_Down, F5, ..."
)


def register(server: MCPServer) -> None:
    def type(text: Annotated[str, Field(min_length=1, max_length=20_000)]) -> str:  # noqa: A001 - the tool's name
        """Type text into the focused element (any Unicode; newlines press Return)."""
        xinput.type_text(text)
        return f"typed {len(text)} characters"

    def key(
        keys: Annotated[
            list[str],
            Field(min_length=1, max_length=20, description=KEYS_HELP),
        ],
        repeat: Annotated[int, Field(ge=1, le=100)] = 1,
    ) -> str:
        """Press key combinations (the sequence `repeat` times)."""
        xinput.key(keys, repeat)
        return f"pressed {' '.join(keys)}" + (f" x{repeat}" if repeat > 1 else "")

    def hold_key(
        keys: Annotated[list[str], Field(min_length=1, max_length=5, description="held together: ['shift']")],
        seconds: Annotated[float, Field(gt=0, le=10)] = 1.0,
    ) -> str:
        """Hold keys down for some seconds, then release them."""
        xinput.hold_key(keys, seconds)
        return f"held {'+'.join(keys)} for {seconds:g} s"

    server.add_tool(limited(TYPE_LIMIT_SEC)(type), structured_output=False)
    for tool in (key, hold_key):
        server.add_tool(limited(60.0)(tool), structured_output=False)
