"""MCP probe: before an agent starts, check the computer-use server exactly as the agent will start it.

The artifact's client mode runs inside the guest (`computer-use probe --spec JSON`): it launches the rendered
command/args/env over stdio, initializes with the agent CLI's protocol version, lists tools and reads
apps/observe/find/screenshot. This module runs that through `run_in_guest`, then judges the evidence here
on the host: the negotiated protocol, the tool list against the channels, a PNG of the guest's screen size,
a tree with nodes when a window is open. No model calls; one overall time limit.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from hcu.computer_use import channels as ch
from hcu.osworld.errors import ProbeError
from hcu.record_io import Record

RunInGuest = Callable[[list[str], float], tuple[int, str, str]]
"""(argv, timeout seconds) → (exit status, stdout, stderr) of a command run inside the guest."""

PROBE_LIMIT_SEC = 90.0
LATEST_PROTOCOL = "2025-11-25"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ProbeCheck(BaseModel):
    name: str
    status: Literal["passed", "failed", "skipped"]
    seconds: float = 0.0
    detail: str = ""


class ProbeReport(Record):
    ok: bool
    protocol_requested: str
    protocol_negotiated: str | None = None
    channels: list[str]
    tools: list[str] = []
    checks: list[ProbeCheck]
    seconds: float

    def check(self, name: str) -> ProbeCheck:
        return next(c for c in self.checks if c.name == name)

    def raise_for_failure(self) -> None:
        """Stop task preparation when any check failed (a ProbeError names the first failure)."""
        failed = [c for c in self.checks if c.status == "failed"]
        if failed:
            raise ProbeError(f"MCP probe failed at {failed[0].name}: {failed[0].detail}")


def client_argv(command: str, args: list[str]) -> list[str]:
    """How to run the artifact itself: the command plus leading non-option args (e.g. python3 /path/cu)."""
    leading = []
    for arg in args:
        if arg.startswith("-"):
            break
        leading.append(arg)
    return [command, *leading]


def probe(
    run_in_guest: RunInGuest,
    *,
    command: str,
    args: list[str],
    env: dict[str, str],
    channels: list[str],
    limit_sec: float = PROBE_LIMIT_SEC,
    protocol_version: str = LATEST_PROTOCOL,
    screen_size: tuple[int, int] | None = None,
    client: list[str] | None = None,
) -> ProbeReport:
    """Probe the server configured by command/args/env inside the guest; never raises for guest failures."""
    spec = {"command": command, "args": args, "env": env, "channels": channels,
            "protocol_version": protocol_version, "limit_sec": max(1.0, limit_sec - 5.0)}
    argv = [*(client or client_argv(command, args)), "probe", "--spec", json.dumps(spec)]
    started = time.monotonic()
    try:
        status, out, err = run_in_guest(argv, limit_sec)
        raw = _last_json_line(out) or {"fatal": f"no report (exit {status}): {(err or out).strip()[-500:]}"}
    except Exception as exc:  # noqa: BLE001 - a failed guest call is a failed probe, reported not raised
        raw = {"fatal": f"running the probe in the guest failed: {type(exc).__name__}: {exc}"}
    checks = judge(raw, channels, protocol_version, screen_size, max_width=_max_width(args))
    return ProbeReport(
        ok=all(c.status != "failed" for c in checks),
        protocol_requested=protocol_version,
        protocol_negotiated=raw.get("protocol_negotiated"),
        channels=list(channels),
        tools=raw.get("tools", []),
        checks=checks,
        seconds=round(time.monotonic() - started, 3),
    )


def _last_json_line(out: str) -> dict[str, Any] | None:
    for line in reversed(out.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def judge(raw: dict[str, Any], channels: list[str], protocol: str, screen_size: tuple[int, int] | None,
          *, max_width: int | None = None) -> list[ProbeCheck]:
    """Turn the guest's steps and evidence into checks (passed/failed/skipped). `max_width`: the server was
    told to downscale screenshots wider than this (keeping the aspect ratio)."""
    steps = {s["name"]: s for s in raw.get("steps", [])}
    evidence = raw.get("evidence", {})
    fatal = raw.get("fatal")

    def step(name: str, verdict: Callable[[], str | None]) -> ProbeCheck:
        found = steps.get(name)
        if found is None:
            return ProbeCheck(name=name, status="failed", detail=fatal or "not reached")
        problem = found["error"] or verdict()
        status = "failed" if problem else "passed"
        return ProbeCheck(name=name, status=status, seconds=found["seconds"], detail=problem or "")

    checks = [
        step("initialize", lambda: None if raw.get("protocol_negotiated") == protocol else
             f"asked for protocol {protocol}, server answered {raw.get('protocol_negotiated')}"),
        step("tools", lambda: _tool_problem(raw.get("tools", []), channels)),
    ]
    if ch.A11Y in channels:
        checks.append(step("apps", lambda: None if isinstance(evidence.get("apps"), list) else "no app list"))
        if "apps" in steps and not steps["apps"]["error"] and "observe" not in steps and not fatal:
            checks += [ProbeCheck(name=n, status="skipped", detail="no open window (empty desktop)")
                       for n in ("observe", "find")]
        else:
            checks.append(step("observe", lambda: None if evidence.get("observe", {}).get("nodes") else
                               "the tree of an open window has no nodes"))
            checks.append(step("find", lambda: None if evidence.get("find", {}).get("matches") else
                               "find returned nothing for a name seen by observe"))
    if ch.GUI in channels:
        size = _shown_size(screen_size or tuple(evidence.get("display_size") or ()) or None, max_width)
        checks.append(step("screenshot", lambda: _png_problem(evidence.get("screenshot", {}), size)))
    if fatal and all(c.status != "failed" for c in checks):
        checks.append(ProbeCheck(name="session", status="failed", detail=fatal))
    return checks


def _max_width(args: list[str]) -> int | None:
    flag = "--max-screenshot-width"
    if flag in args[:-1] and args[args.index(flag) + 1].isdigit():
        return int(args[args.index(flag) + 1])
    return None


def _shown_size(size: tuple[int, int] | None, max_width: int | None) -> tuple[int, int] | None:
    """The size a screenshot of a `size` screen comes back in when the server downscales to `max_width`."""
    if size is None or not max_width or size[0] <= max_width:
        return size
    return max_width, round(size[1] * max_width / size[0])


def _tool_problem(tools: list[str], channels: list[str]) -> str | None:
    expected = set(ch.tools_for(channels))
    missing, extra = sorted(expected - set(tools)), sorted(set(tools) - expected)
    if missing or extra:
        return f"tool list differs from channels {','.join(channels)}: missing {missing}, unexpected {extra}"
    return None


def png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG header, or None if `data` is not a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def _png_problem(shot: dict[str, Any], size: tuple[int, int] | None) -> str | None:
    try:
        data = base64.b64decode(shot.get("png_b64", ""), validate=True)
    except (binascii.Error, ValueError):
        return "screenshot data is not base64"
    found = png_size(data)
    if found is None:
        return f"screenshot is not a PNG ({len(data)} bytes, {shot.get('mime_type')})"
    if size is not None and found != tuple(size):
        return f"screenshot is {found[0]}x{found[1]}, the guest screen is {size[0]}x{size[1]}"
    return None


def docker_exec_runner(container: Any, user: str = "") -> RunInGuest:
    """A RunInGuest over `docker exec` (docker SDK container) as `user` (default: the image's user),
    bounded by coreutils `timeout` in the guest."""

    def run(argv: list[str], timeout: float) -> tuple[int, str, str]:
        result = container.exec_run(["timeout", "-k", "5", str(int(timeout)), *argv], user=user, demux=True)
        out, err = result.output
        return result.exit_code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hcu.osworld.attempt.mcp_probe", description=__doc__)
    parser.add_argument("--container", required=True, help="id or name of a running guest container")
    parser.add_argument("--command", required=True, help="the server command as the agent config renders it")
    parser.add_argument("--arg", action="append", default=[], help="one server argument (repeatable)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    parser.add_argument("--channels", default=",".join(ch.DEFAULT_CHANNELS))
    parser.add_argument("--protocol-version", default=LATEST_PROTOCOL)
    parser.add_argument("--limit-sec", type=float, default=PROBE_LIMIT_SEC)
    parser.add_argument("--user", default="user", help="guest user the agent runs as (default: %(default)s)")
    opts = parser.parse_args(argv)
    bad_env = [item for item in opts.env if "=" not in item]
    if bad_env:
        parser.error(f"--env: expected KEY=VALUE, got {bad_env[0]!r}")
    try:
        channels = list(ch.parse_channels(opts.channels))
    except ValueError as exc:
        parser.error(str(exc))
    import docker

    try:
        container = docker.from_env(timeout=30).containers.get(opts.container)
    except docker.errors.DockerException as exc:
        print(f"mcp_probe: --container {opts.container!r}: {exc}", file=sys.stderr)
        return 2
    report = probe(docker_exec_runner(container, opts.user), command=opts.command, args=opts.arg,
                   env=dict(item.split("=", 1) for item in opts.env), channels=channels,
                   limit_sec=opts.limit_sec, protocol_version=opts.protocol_version)
    print(report.model_dump_json(indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
