"""Shared command-line shell of the three gateways: flags derived from `hcu.gateway.options` (through
hcu.flags), one-line errors (exit 2, nothing written), start and serve. Credentials stay in environment
variables (a command line is visible to every local user)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, NoReturn, TypeVar
from urllib.parse import urlsplit

from hcu.flags import OneLineParser, add_flags, parse_flags
from hcu.gateway.core import GatewayState, build_app, serve
from hcu.gateway.options import GatewayOptions, SinglePortOptions
from hcu.gateway.pool import Pool, Upstream, UpstreamSpecError, parse_upstreams
from hcu.gateway.provider import Provider
from hcu.gateway.scope_secret import ScopeKeyError

OptionsT = TypeVar("OptionsT", bound=GatewayOptions)


class Shell(Generic[OptionsT]):
    """One gateway command: its parser, its one-line failures, its start."""

    def __init__(self, module: str, options: type[OptionsT]) -> None:
        self.options = options
        self.parser = OneLineParser(prog=f"python -m {module}", description=f"The {module} model gateway.")
        add_flags(self.parser, options)

    def parse(self, argv: Sequence[str] | None) -> OptionsT:
        return parse_flags(self.options, argv, self.parser)

    def fail(self, message: str) -> NoReturn:
        """One line on stderr, exit 2, nothing written."""
        self.parser.error(message)

    def token_from_env(self, name: str) -> str:
        token = os.environ.get(name, "").strip()
        if not token:
            self.fail(f"{name}: environment variable is missing or empty (the upstream credential)")
        return token

    def base_from_env(self, name: str, default: str | None) -> tuple[str, Upstream, str]:
        """(scheme, upstream, path prefix) from a base URL like `https://host[:port][/prefix]`."""
        value = os.environ.get(name, "").strip() or default
        if not value:
            self.fail(f"{name}: environment variable is missing (expected a base URL like https://host)")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or "@" in parts.netloc:
            self.fail(f"{name}: expected a base URL like https://host[:port][/prefix], got {value!r}")
        try:
            (upstream,) = parse_upstreams(parts.netloc)
        except UpstreamSpecError:
            self.fail(f"{name}: bad host in {value!r}")
        return parts.scheme, upstream, parts.path

    def check_out(self, path: Path) -> None:
        """Refuse an --out the gateway could not append to, before the log is written; make its folder if
        missing (`--out runs/single/tokens.jsonl` in a fresh checkout)."""
        if path.is_dir() or (path.exists() and not os.access(path, os.W_OK)):
            self.fail(f"--out: {path} is not a writable file")
        if path.exists():
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.fail(f"--out: cannot create directory {path.parent} ({exc.strerror})")
        if not os.access(path.parent, os.W_OK):
            self.fail(f"--out: directory {path.parent} is not writable")

    def run(self, options: OptionsT, provider: Provider, upstreams: list[Upstream], pins: list[str],
            warnings: Sequence[str] = ()) -> None:
        """Validate, start every listener, serve until interrupted."""
        self.check_out(options.out)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        for warning in warnings:
            logging.getLogger("hcu.gateway").warning(warning)
        try:
            state = GatewayState(options.config(), provider, Pool(upstreams, pins))
        except ScopeKeyError as exc:
            self.fail(f"--scope-key-file: {exc}")
        asyncio.run(self._serve_forever(state, options.host, options.ports_to_serve()))

    async def _serve_forever(self, state: GatewayState, host: str, ports: list[int]) -> None:
        try:
            runner = await serve(build_app(state), host, ports)
        except OSError as exc:
            self.fail(f"--host/--port: cannot listen on {host}:{ports} ({exc.strerror})")
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


def serve_one_upstream(module: str, argv: Sequence[str] | None, *, base_env: str, default_base: str | None,
                       token_env: str, provider: Callable[[str, str, str], Provider]) -> None:
    """A gateway in front of one upstream named by a base URL (`provider(token, scheme, base path)`)."""
    shell = Shell(module, SinglePortOptions)
    options = shell.parse(argv)
    scheme, upstream, base_path = shell.base_from_env(base_env, default_base)
    token = shell.token_from_env(token_env)
    shell.run(options, provider(token, scheme, base_path), [upstream], [])
