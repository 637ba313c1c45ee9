"""The MCP probe against the test desktop: a fixture window passes every check, an empty desktop skips."""

from __future__ import annotations

import pytest
from cu_desktop import GUEST_ARTIFACT, Desktop

from hcu.osworld.attempt.mcp_probe import ProbeReport, docker_exec_runner, probe
from hcu.osworld.errors import ProbeError

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]

GUEST_ENV = {"DISPLAY": ":0", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus"}


def run_probe(desktop: Desktop, channels: list[str], server_channels: str = "", **kwargs) -> ProbeReport:
    return probe(docker_exec_runner(desktop.container, "user"), command=GUEST_ARTIFACT,
                 args=["--channels", server_channels or ",".join(channels)], env=GUEST_ENV,
                 channels=channels, **kwargs)


def test_probe_passes_against_the_app_window(desktop: Desktop) -> None:
    desktop.start_app_if_closed()
    version = "2025-06-18"  # what Codex, Gemini and Grok send (the default is Claude's 2025-11-25)
    report = run_probe(desktop, ["gui", "a11y", "keyboard"], protocol_version=version)
    assert report.ok, report.model_dump_json(indent=2)
    assert report.protocol_negotiated == version
    assert [(c.name, c.status) for c in report.checks] == [
        (name, "passed") for name in ("initialize", "tools", "apps", "observe", "find", "screenshot")]
    assert report.seconds < 90
    report.raise_for_failure()


def test_probe_skips_observe_and_find_on_an_empty_desktop(desktop: Desktop) -> None:
    desktop.kill_app()
    try:
        report = run_probe(desktop, ["gui", "a11y", "keyboard"], screen_size=(1920, 1080))
    finally:
        desktop.start_app()
    assert report.ok, report.model_dump_json(indent=2)
    statuses = {c.name: c.status for c in report.checks}
    assert statuses == {"initialize": "passed", "tools": "passed", "apps": "passed", "observe": "skipped",
                        "find": "skipped", "screenshot": "passed"}


def test_probe_failures_name_the_broken_check(desktop: Desktop) -> None:
    desktop.start_app_if_closed()
    report = run_probe(desktop, ["gui", "a11y"], server_channels="gui", screen_size=(1280, 800))
    assert not report.ok
    assert report.check("tools").status == "failed" and "missing" in report.check("tools").detail
    assert report.check("apps").status == "failed"
    assert report.check("screenshot").status == "failed" and "1920x1080" in report.check("screenshot").detail
    with pytest.raises(ProbeError, match="tools"):
        report.raise_for_failure()
    missing = probe(docker_exec_runner(desktop.container, "user"), command="/nonexistent/computer-use",
                    args=[], env=GUEST_ENV, channels=["gui"], limit_sec=30)
    assert not missing.ok and missing.check("initialize").status == "failed"
