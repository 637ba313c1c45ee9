"""Shared command-line shell of the three gateways: flags, one-line errors (exit 2), start and serve."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

from hcu.gateway.core import GatewayConfig, GatewayState, build_app, serve
from hcu.gateway.pool import Pool, Upstream, UpstreamSpecError, parse_upstreams
from hcu.gateway.provider import Provider
from hcu.gateway.scope_secret import ScopeKeyError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(message)


def fail(message: str) -> NoReturn:
    """One line on stderr, exit 2, nothing written."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _ports(value: str) -> list[int]:
    try:
        ports = [int(p) for p in value.split(",")]
    except ValueError:
        ports = []
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"expected port numbers like 8611 or 8611,8612, got {value!r}")
    return ports


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def _budget(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0 (0 = no budget), got {value!r}")
    return int(value)


def _seconds(value: str) -> float:
    try:
        sec = float(value)
    except ValueError:
        sec = -1.0
    if sec < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {value!r}")
    return sec


def _positive_seconds(value: str) -> float:
    sec = _seconds(value)
    if sec == 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {value!r}")
    return sec


def parser(prog: str, multi_port: bool) -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {prog}")
    p.add_argument("--host", required=True)
    if multi_port:
        p.add_argument("--ports", required=True, type=_ports)
    else:
        p.add_argument("--port", required=True, type=lambda v: _ports(v)[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--max-requests-per-task", required=True, type=_budget,
                   help="successful generations allowed per task scope (0 = no budget)")
    p.add_argument("--rate-limit-max-wait", type=_seconds, default=300.0)
    p.add_argument("--scope-key-file", type=Path, help="serve a task scope only to requests carrying its secret "
                   "(an HMAC of the scope under this key; created when missing); the runner's --scope-key-file")
    p.add_argument("--upstream-idle-timeout", type=_positive_seconds, default=300.0,
                   help="longest silence from the upstream, before its headers or between stream chunks")
    p.add_argument("--header-timeout", type=_positive_seconds, default=15.0,
                   help="close a client connection idle this long or still sending its request header")
    p.add_argument("--max-connections-per-peer", type=_positive_int, default=64,
                   help="open client connections allowed per peer address")
    return p


def token_from_env(name: str) -> str:
    token = os.environ.get(name, "").strip()
    if not token:
        fail(f"{name}: environment variable is missing or empty (the upstream credential)")
    return token


def base_from_env(name: str, default: str | None) -> tuple[str, Upstream, str]:
    """(scheme, upstream, path prefix) from a base URL like `https://host[:port][/prefix]`."""
    value = os.environ.get(name, "").strip() or default
    if not value:
        fail(f"{name}: environment variable is missing (expected a base URL like https://host)")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or "@" in parts.netloc:
        fail(f"{name}: expected a base URL like https://host[:port][/prefix], got {value!r}")
    try:
        (upstream,) = parse_upstreams(parts.netloc)
    except UpstreamSpecError:
        fail(f"{name}: bad host in {value!r}")
    return parts.scheme, upstream, parts.path


def check_out(path: Path) -> None:
    """Refuse an --out the gateway could not append to, before the log is written; make its folder if missing
    (`--out runs/single/tokens.jsonl` in a fresh checkout)."""
    if path.is_dir() or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"--out: {path} is not a writable file")
    if path.exists():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--out: cannot create directory {path.parent} ({exc.strerror})")
    if not os.access(path.parent, os.W_OK):
        fail(f"--out: directory {path.parent} is not writable")


def run(args: argparse.Namespace, provider: Provider, upstreams: list[Upstream], pins: list[str],
        warnings: Sequence[str] = ()) -> None:
    """Validate, start every listener, serve until interrupted."""
    check_out(args.out)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for warning in warnings:
        logging.getLogger("hcu.gateway").warning(warning)
    config = GatewayConfig(
        max_requests_per_task=args.max_requests_per_task,
        rate_limit_max_wait=args.rate_limit_max_wait,
        out=args.out,
        idle_timeout_sec=args.upstream_idle_timeout,
        header_timeout_sec=args.header_timeout,
        max_connections_per_peer=args.max_connections_per_peer,
        scope_key_file=args.scope_key_file,
    )
    try:
        state = GatewayState(config, provider, Pool(upstreams, pins))
    except ScopeKeyError as exc:
        fail(f"--scope-key-file: {exc}")
    ports = args.ports if hasattr(args, "ports") else [args.port]
    asyncio.run(_serve_forever(state, args.host, ports))


async def _serve_forever(state: GatewayState, host: str, ports: list[int]) -> None:
    try:
        runner = await serve(build_app(state), host, ports)
    except OSError as exc:
        fail(f"--host/--port: cannot listen on {host}:{ports} ({exc.strerror})")
    logging.getLogger("hcu.gateway").info(
        "%s gateway on %s:%s, %d calls per task, per-task secrets %s",
        state.provider.name,
        host,
        ports,
        state.config.max_requests_per_task,
        "on" if state.scope_guard else "off",
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
