"""Recording changes nothing the model sees: the same calls against the same desktop give byte-identical tool
results with the call log on and off (the built artifact in the test desktop, over MCP), while the call log
holds each call, its result and the screen after each action."""

from __future__ import annotations

import anyio
import orjson
import pytest
from mcp import Client, StdioServerParameters

from hcu.computer_use.call_log import CALLS_FILE, ENV_DIR
from hcu.osworld.attempt.mcp_probe import docker_exec_runner, probe
from tests.computer_use.cu_desktop import GUEST_ARTIFACT, Desktop, start_desktop

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]
GUEST_LOG = "/tmp/hcu-call-log"
CALLS = [
    ("move", {"x": 10, "y": 10}),
    ("screenshot", {}),
    ("screenshot", {"format": "jpeg", "max_width": 960}),
    ("apps", {}),
    ("observe", {}),
    ("find", {"role": "push button"}),
    ("cursor_position", {}),
    ("click", {"x": 330, "y": 185}),  # the app window's empty lower part (screen 660, 370): nothing changes
    ("key", {"keys": ["Escape"]}),
    ("zoom", {"x0": 0, "y0": 0, "x1": 100, "y1": 50}),
    ("click", {"x": 5000, "y": 5}),
    ("wait", {"secs": 1}),
    ("wait", {"seconds": 0.1}),
]
ACTIONS = {"move", "click", "key"}


@pytest.fixture(scope="module")
def desktop():
    desktop = start_desktop("evidence-unchanged")
    try:
        status, out = desktop.exec([GUEST_ARTIFACT, "--list-tools"], timeout=120)
        assert status == 0, out
        # no blinking caret: the screen must be the same pixels whenever it is captured
        desktop.exec(["sh", "-c", "mkdir -p ~/.config/gtk-3.0 && printf '[Settings]\\ngtk-cursor-blink = false\\n' "
                      "> ~/.config/gtk-3.0/settings.ini"])
        desktop.restart_app()
        yield desktop
    finally:
        desktop.container.remove(force=True, v=True)


def server(desktop: Desktop, *env: str) -> StdioServerParameters:
    flags = [arg for item in env for arg in ("-e", item)]
    return StdioServerParameters(command="docker", args=["exec", "-i", "-u", "user", *flags, desktop.container.id,
                                                         GUEST_ARTIFACT])


async def results(params: StdioServerParameters) -> list[bytes]:
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        return [orjson.dumps((await client.call_tool(name, arguments)).model_dump(mode="json"))
                for name, arguments in CALLS]


def test_tool_results_are_byte_identical_with_the_call_log_on_and_off(desktop: Desktop) -> None:
    anyio.run(results, server(desktop))  # the desktop as the calls leave it (pointer, focus): every run starts there
    off = anyio.run(results, server(desktop))
    on = anyio.run(results, server(desktop, f"{ENV_DIR}={GUEST_LOG}"))
    again_off = anyio.run(results, server(desktop))
    assert again_off == off, "the calls give the same answers run after run (else the comparison means nothing)"
    for (name, arguments), with_log, without in zip(CALLS, on, off, strict=True):
        assert with_log == without, (name, arguments)
    status, log = desktop.exec(["cat", f"{GUEST_LOG}/{CALLS_FILE}"])
    assert status == 0, log
    records = [orjson.loads(line) for line in log.splitlines()]
    calls = [r for r in records if r["kind"] == "call"]
    assert [(c["tool"], c["arguments"]) for c in calls] == [(n, a) for n, a in CALLS]
    assert [c["error"] for c in calls] == [orjson.loads(r)["is_error"] for r in on]
    shots = {r["seq"]: r for r in records if r["kind"] == "shot"}
    expected = {seq for seq, (name, _) in enumerate(CALLS, start=1)
                if (name in ACTIONS or name == "screenshot") and not calls[seq - 1]["error"]}
    assert set(shots) == expected and all(s["file"] for s in shots.values())
    assert shots[1]["pointer"] == [10, 10] and shots[8]["pointer"] == [660, 370], "screen pixels (half-size shot)"


def test_the_mcp_probe_leaves_the_call_log_alone(desktop: Desktop) -> None:
    """The probe starts the server as the agent will, environment included, but its calls are not the agent's."""
    folder = "/tmp/hcu-probe-call-log"
    env = {"DISPLAY": ":0", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus", ENV_DIR: folder}
    report = probe(docker_exec_runner(desktop.container, "user"), command=GUEST_ARTIFACT,
                   args=["--channels", "gui,a11y,keyboard"], env=env, channels=["gui", "a11y", "keyboard"])
    assert report.ok, report.model_dump_json(indent=2)
    status, _ = desktop.exec(["test", "-e", f"{folder}/{CALLS_FILE}"])
    assert status == 1, "the probe's calls went into the call log"
