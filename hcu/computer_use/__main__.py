"""`computer-use [options]` serves MCP on stdio; `computer-use probe --spec JSON` checks a config."""

from __future__ import annotations

import argparse
import logging
import sys

from . import channels as ch


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="computer-use", description=__doc__)
    parser.add_argument("--channels", default=",".join(ch.DEFAULT_CHANNELS),
                        help=f"comma list of {', '.join(ch.CHANNELS)} (default: %(default)s)")
    parser.add_argument("--code-mode", action="store_true", help="also enable the code channel")
    parser.add_argument("--max-screenshot-width", type=int, default=None,
                        help="downscale screenshots wider than this (coordinates are mapped back)")
    parser.add_argument("--tool-limit-sec", type=float, default=None,
                        help="upper bound on any tool call's duration (each tool also has its own limit)")
    parser.add_argument("--list-tools", action="store_true", help="print the enabled tool names and exit")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command")
    probe = sub.add_parser("probe", help="start a configured server as an MCP client, print one JSON report")
    probe.add_argument("--spec", required=True, help="JSON: command, args, env, channels, protocol_version")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    opts = parser.parse_args(argv)
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=opts.log_level, force=True,
                        format="computer-use %(levelname)s %(message)s")
    if opts.command == "probe":
        from .probe_client import run_probe_cli

        sys.exit(run_probe_cli(opts.spec))
    try:
        channels = ch.parse_channels(opts.channels, code_mode=opts.code_mode)
    except ValueError as exc:
        parser.error(str(exc))
    if opts.max_screenshot_width is not None and opts.max_screenshot_width < 64:
        parser.error("--max-screenshot-width: expected a pixel width of at least 64")
    if opts.tool_limit_sec is not None and opts.tool_limit_sec <= 0:
        parser.error("--tool-limit-sec: expected a positive number of seconds")
    if opts.list_tools:
        print("\n".join(ch.tools_for(channels)))
        return
    from . import runtime
    from .call_log import open_from_env
    from .recorder import Recorder
    from .server import build_server
    from .session_env import ensure_session_env

    runtime.LIMIT_CAP_SEC = opts.tool_limit_sec

    ensure_session_env()
    call_log = open_from_env()
    recorder = Recorder(call_log) if call_log is not None else None
    build_server(channels, max_screenshot_width=opts.max_screenshot_width, recorder=recorder).run("stdio")


if __name__ == "__main__":
    main()
