"""The same artifact on CPython 3.10 (the official Ubuntu 22.04 guest's python3), inside the test desktop.

The test desktop is Debian bookworm like this host, so pyenv's 3.10 build runs in it when mounted. Its
system pyatspi is built for 3.11, so on 3.10 the a11y tools must fail cleanly while gui and keyboard work.
"""

from __future__ import annotations

import glob
import os

import pytest
from cu_desktop import connect, start_desktop
from mcp import types

from hcu.computer_use.channels import tools_for

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]

GUEST_PY310 = "/opt/py310"


def host_python310() -> str:
    builds = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10.*")))
    assert builds, "no CPython 3.10 under ~/.pyenv/versions (pyenv install 3.10)"
    return builds[-1]


async def test_artifact_serves_on_python310() -> None:
    desktop = start_desktop("test_python310", volumes={host_python310(): {"bind": GUEST_PY310, "mode": "ro"}},
                            environment={"LD_LIBRARY_PATH": f"{GUEST_PY310}/lib"})
    try:
        status, out = desktop.exec([f"{GUEST_PY310}/bin/python3.10", "--version"])
        assert status == 0 and out.startswith("Python 3.10"), out
        async with connect(desktop.server(python=f"{GUEST_PY310}/bin/python3.10")) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == tools_for(["gui", "a11y", "keyboard"])
            shot = await client.call_tool("screenshot", {"max_width": 640})
            assert not shot.is_error, shot.content
            line = next(c.text for c in shot.content if isinstance(c, types.TextContent))
            assert line.startswith("screenshot 640x360 px, screen 1920x1080 px"), line
            moved = await client.call_tool("move", {"x": 100, "y": 100})
            assert not moved.is_error, moved.content
            apps = await client.call_tool("apps", {})
            message = next(c.text for c in apps.content if isinstance(c, types.TextContent))
            assert apps.is_error and "pyatspi" in message, message
    finally:
        desktop.container.remove(force=True, v=True)
