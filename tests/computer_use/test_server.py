"""The built artifact in the test desktop, driven by the official MCP client over `docker exec -i`."""

from __future__ import annotations

import base64
import io
import json

import pytest
from cu_desktop import Desktop, connect
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from PIL import Image, ImageChops

from hcu.computer_use.channels import TOOLS_BY_CHANNEL, tools_for
from hcu.computer_use.probe_client import initialize

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]


def image_of(result: types.CallToolResult) -> Image.Image:
    assert not result.is_error, result.content
    images = [c for c in result.content if isinstance(c, types.ImageContent)]
    assert len(images) == 1, result.content
    return Image.open(io.BytesIO(base64.b64decode(images[0].data)))


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def ok_json(result: types.CallToolResult) -> dict:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


# The keysyms the guest's keyboard map holds now, read with the guest's own python-xlib.
KEYSYMS_BOUND = """
from Xlib.display import Display
d = Display()
low = d.display.info.min_keycode
print(*{hex(sym) for syms in d.get_keyboard_mapping(low, d.display.info.max_keycode - low + 1) for sym in syms})
"""


async def find_one(client, **query) -> dict:
    matches = ok_json(await client.call_tool("find", query))["matches"]
    assert len(matches) == 1, matches
    return matches[0]


def centre(node: dict) -> tuple[int, int]:
    x, y, w, h = node["bounds"]
    return x + w // 2, y + h // 2


async def test_screenshots_and_downscaled_coordinates(desktop: Desktop) -> None:
    desktop.restart_app()
    async with connect(desktop.server()) as client:
        result = await client.call_tool("screenshot", {})
        shot = image_of(result)
        assert (shot.format, shot.size) == ("PNG", (1920, 1080))
        assert shot.convert("L").getextrema()[1] > 0, "the screenshot is all black"
        assert "1920x1080" in text_of(result) and "cursor at" in text_of(result)
        jpeg = image_of(await client.call_tool("screenshot", {"format": "jpeg", "max_width": 960}))
        assert (jpeg.format, jpeg.size) == ("JPEG", (960, 540))
        zoomed = image_of(await client.call_tool("zoom", {"x0": 100, "y0": 50, "x1": 200, "y1": 100}))
        assert zoomed.size == (200, 100), "zoom shows the region at full screen resolution"
        # Coordinates now refer to the half-size image: the button's centre halves.
        x, y = centre(await find_one(client, role="push button", name="Click me"))
        result = await client.call_tool("click", {"x": x // 2, "y": y // 2})
        assert not result.is_error, text_of(result)
        desktop.wait_for(lambda: desktop.ax_node("label")["name"] == "Clicked", "the label to read Clicked")
        # The pointer is already there: a second click at the same point must not wait for motion.
        again = await client.call_tool("click", {"x": x // 2, "y": y // 2})
        assert not again.is_error, text_of(again)


async def test_click_and_type_change_the_app(desktop: Desktop) -> None:
    desktop.restart_app()
    async with connect(desktop.server()) as client:
        before = image_of(await client.call_tool("screenshot", {})).convert("RGB")
        entry = await find_one(client, role="text", name="Text entry")
        button = await find_one(client, role="push button", name="Click me")
        x, y = centre(entry)
        assert not (await client.call_tool("click", {"x": x, "y": y})).is_error
        # more distinct characters than the map has spare keycodes (18): some are bound twice in the call
        typed = "héllo wörld ✓ 日本 あいうえおかきくけこさしすせそ ÄÖÜ"
        assert not (await client.call_tool("type", {"text": typed})).is_error
        bound = desktop.exec(["python3", "-c", KEYSYMS_BOUND])[1]
        assert {"0xc4", "0xd6", "0xdc", hex(0x1000000 + ord("そ"))} <= set(bound.split()), "the last bindings stay"
        x, y = centre(button)
        assert not (await client.call_tool("click", {"x": x, "y": y})).is_error
        desktop.wait_for(lambda: desktop.ax_node("label")["name"] == "Clicked", "the label to read Clicked")
        assert desktop.ax_node("text")["text"] == typed
        x, y = centre(entry)
        assert not (await client.call_tool("click", {"x": x, "y": y})).is_error
        assert not (await client.call_tool("key", {"keys": ["ctrl+a", "BackSpace"]})).is_error
        desktop.wait_for(lambda: desktop.ax_node("text")["text"] == "", "ctrl+a, BackSpace to clear the entry")
        after = image_of(await client.call_tool("screenshot", {})).convert("RGB")
        assert ImageChops.difference(before, after).getbbox() is not None, "the screen did not change"


async def test_observe_and_find_return_the_widgets(desktop: Desktop) -> None:
    desktop.restart_app()
    async with connect(desktop.server()) as client:
        apps = ok_json(await client.call_tool("apps", {}))
        windows = [w for app in apps for w in app["windows"] if w["name"] == "HCU Test App"]
        assert len(windows) == 1 and all(app["pid"] > 0 for app in apps)
        tree = ok_json(await client.call_tool("observe", {"element": windows[0]["id"]}))
        by_role = {(n["role"], n["name"]) for n in tree["nodes"]}
        for widget in [("text", "Text entry"), ("push button", "Click me"), ("label", "Not clicked"),
                       ("check box", "Enable option")]:
            assert widget in by_role, f"{widget} missing from {sorted(by_role)}"
        for node in tree["nodes"]:
            x, y, w, h = node["bounds"]
            assert x >= 0 and y >= 0 and x + w <= 1920 and y + h <= 1080, node
        button = await find_one(client, role="button", name="click me")
        assert button["id"] in {n["id"] for n in tree["nodes"]}, "find and observe disagree on the id"
        assert ok_json(await client.call_tool("observe", {}))["root"] == windows[0]["id"]


async def test_act_and_set_text_change_the_app(desktop: Desktop) -> None:
    desktop.restart_app()
    async with connect(desktop.server()) as client:
        first = ok_json(await client.call_tool("observe", {}))["nodes"]
        label_id = next(n["id"] for n in first if n["role"] == "label")
        checkbox = await find_one(client, role="check box", name="Enable option")
        assert not (await client.call_tool("act", {"element": checkbox["id"]})).is_error
        desktop.wait_for(lambda: "checked" in desktop.ax_node("check box")["states"], "the check box checked")
        entry = await find_one(client, role="text", name="Text entry")
        result = await client.call_tool("set_text", {"element": entry["id"], "text": "set by set_text"})
        assert not result.is_error, text_of(result)
        assert desktop.ax_node("text")["text"] == "set by set_text"
        button = await find_one(client, role="push button", name="Click me")
        assert not (await client.call_tool("act", {"element": button["id"], "action": "click"})).is_error
        desktop.wait_for(lambda: desktop.ax_node("label")["name"] == "Clicked", "the label to read Clicked")
        # The label's id from the first observe still names the label: the tree's shape is unchanged.
        label = ok_json(await client.call_tool("observe", {"element": label_id}))["nodes"][0]
        assert (label["role"], label["name"]) == ("label", "Clicked")


async def test_code_mode_and_time_limits(desktop: Desktop) -> None:
    async with connect(desktop.server("--channels", "gui", "--code-mode", "--tool-limit-sec", "3")) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == tools_for(["gui", "code"])
        shell = text_of(await client.call_tool("run_shell", {"command": "id -un; echo oops >&2; exit 3"}))
        assert shell.startswith("exit status 3") and "user" in shell and "oops" in shell
        slow = text_of(await client.call_tool("run_shell", {"command": "sleep 30", "timeout_sec": 1}))
        assert slow.startswith("killed after 1 s")
        big = text_of(await client.call_tool("run_python", {"code": "print('x' * 9**5)", "max_output": 1000}))
        assert "elided" in big and len(big) < 2000
        # A tool past its limit answers with an error, and the server keeps serving.
        result = await client.call_tool("wait", {"seconds": 10})
        assert result.is_error and "did not finish within 3 s" in text_of(result)
        result = await client.call_tool("cursor_position", {})
        assert not result.is_error and "cursor at" in text_of(result)


MALFORMED = {
    "screenshot": {"format": "bmp"},
    "zoom": {"x0": 10, "y0": 10, "x1": 5, "y1": 20},
    "click": {"x": "left", "y": 3},
    "move": {"x": -5, "y": 3},
    "drag": {"path": [[1, 2, 3], [4, 5]]},
    "mouse_down": {"button": "thumb"},
    "mouse_up": {"button": "left", "x": 5},
    "scroll": {"direction": "sideways"},
    "cursor_position": {"extra": 1},
    "wait": {"seconds": 3600},
    "type": {"text": ""},
    "key": {"keys": ["ctrl+nosuchkey"]},
    "hold_key": {"keys": []},
    "apps": {"verbose": True},
    "observe": {"element": "not-an-id"},
    "find": {},
    "act": {"element": "999999:0"},
    "set_text": {"element": "1:0"},
    "run_shell": {"command": "true", "timeout_sec": 0},
    "run_python": {"code": ""},
}


async def test_malformed_arguments_are_tool_errors(desktop: Desktop) -> None:
    assert set(MALFORMED) == set(tools_for(list(TOOLS_BY_CHANNEL)))
    async with connect(desktop.server("--code-mode")) as client:
        for tool, arguments in MALFORMED.items():
            result = await client.call_tool(tool, arguments)
            assert result.is_error, f"{tool}({arguments}) was accepted: {text_of(result)}"
            assert text_of(result).strip(), f"{tool}: the error says nothing"
            after = await client.call_tool("cursor_position", {})
            assert not after.is_error, f"the server is unusable after {tool}: {text_of(after)}"


@pytest.mark.parametrize(("version", "channels", "absent"),
                         [("2025-06-18", "gui,keyboard", "a11y"), ("2025-11-25", "a11y,keyboard", "gui")])
async def test_each_cli_protocol_and_channel_selection(desktop: Desktop, version: str, channels: str,
                                                      absent: str) -> None:
    params = desktop.server("--channels", channels)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        result = await initialize(session, version)
        assert result.protocol_version == version
        names = [tool.name for tool in (await session.list_tools()).tools]
    assert names == tools_for(channels.split(","))
    assert not set(names) & set(TOOLS_BY_CHANNEL[absent])


async def test_accessibility_needs_the_session_bus_and_ignores_a_stray_x_property(desktop: Desktop) -> None:
    desktop.start_app_if_closed()
    # A process without the session bus once left AT_SPI_BUS on the root window pointing at its own bus.
    status, out = desktop.exec(["xprop", "-root", "-f", "AT_SPI_BUS", "8s", "-set", "AT_SPI_BUS",
                                "unix:path=/nonexistent/at-spi-bus"])
    assert status == 0, out
    try:
        async with connect(desktop.server()) as client:
            apps = ok_json(await client.call_tool("apps", {}))
            assert any(w["name"] == "HCU Test App" for app in apps for w in app["windows"]), apps
    finally:
        desktop.exec(["xprop", "-root", "-remove", "AT_SPI_BUS"])
    # root may not use the desktop user's session bus: a clear error, and the server lives on.
    as_root = desktop.server()
    as_root.args[as_root.args.index("-u") + 1] = "root"
    async with connect(as_root) as client:
        result = await client.call_tool("apps", {})
        assert result.is_error and "accessibility is unavailable" in text_of(result), text_of(result)
        assert not (await client.call_tool("cursor_position", {})).is_error
