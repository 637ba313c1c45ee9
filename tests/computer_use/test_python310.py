"""The same artifact on CPython 3.10 (the official Ubuntu 22.04 guest's python3), inside the test desktop.

No Debian release ships CPython 3.10, so this test needs one from outside Debian's packages: `$HCU_PYTHON310`
(an install prefix), else pyenv's newest 3.10 build; it prints which one it used. The test desktop is Debian
bookworm, so such a build runs in it when mounted. Its system pyatspi is built for 3.11, so on 3.10 the a11y
tools must fail cleanly while gui and keyboard work.
"""

from __future__ import annotations

import glob
import os

import pytest
from cu_desktop import connect, start_desktop
from mcp import types

from hcu.computer_use.channels import tools_for

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.python310]

GUEST_PY310 = "/opt/py310"


def host_python310() -> str:
    """The install prefix of a CPython 3.10 on this host."""
    configured = os.environ.get("HCU_PYTHON310")
    if configured:
        return configured
    builds = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10.*")))
    assert builds, "no CPython 3.10: set HCU_PYTHON310 to a 3.10 install prefix (or pyenv install 3.10)"
    return builds[-1]


async def test_artifact_serves_on_python310(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\n[computer-use on CPython 3.10] interpreter: {host_python310()}/bin/python3.10")
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
