"""python -m hcu.osworld.view RUN_DIR [--compare OTHER_RUN_DIR] [--host H] [--port P] [--export OUT_DIR]: the
run viewer. Serves RUN_DIR's pages on http://127.0.0.1:8765/ (loopback unless --host says otherwise) until
Ctrl-C, or with --export writes them as a static site that opens from disk. See docs/viewer.md.

Exit status: 0 served until stopped, or exported; 2 bad flags, a folder that is not a run directory, an
address that cannot be bound, or an export folder that cannot take an export (one line each).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from aiohttp import web
from pydantic import Field

from hcu.flags import OneLineParser, Settings, add_flags, parse_flags
from hcu.osworld.view.data import RunData, RunDirError
from hcu.osworld.view.export import ExportError, export
from hcu.osworld.view.server import is_loopback, make_app
from hcu.osworld.view.site import Site

PROG = "python -m hcu.osworld.view"


class ViewOptions(Settings):
    compare: Path | None = None
    """Another run directory to show beside RUN_DIR: both runs' figures, the tasks they disagree on first, and
    one task's steps in both."""
    host: str = Field(default="127.0.0.1", min_length=1)
    """Address to listen on. Anything but loopback lets whoever reaches it read the run."""
    port: int = Field(default=8765, ge=0, le=65535)
    """Port to listen on (0: any free one; the URL is printed)."""
    export: Path | None = None
    """Write the pages as a static site into this folder (new, empty, or an earlier export) instead of serving."""


class ViewCommand(ViewOptions):
    run_dir: Path


def parse_args(argv: list[str] | None) -> ViewCommand:
    parser = OneLineParser(prog=PROG, description=__doc__)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (runs/<run_id>)")
    add_flags(parser, ViewOptions)
    return parse_flags(ViewCommand, argv, parser)


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RunDirError(f"--host/--port: cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.listen(128)
    return sock


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        site = Site(RunData(opts.run_dir), RunData(opts.compare) if opts.compare else None)
    except RunDirError as exc:
        return _fail(str(exc))
    if opts.export is not None:
        try:
            report = export(site, opts.export)
        except ExportError as exc:
            return _fail(str(exc))
        print(f"hcu view: exported {report.pages} pages and {report.files} run files to {opts.export} "
              f"(open {opts.export / 'index.html'}); {report.refused} linked files left out")
        return 0
    try:
        sock = listening_socket(opts.host, opts.port)
    except RunDirError as exc:
        return _fail(str(exc))
    loopback = is_loopback(opts.host)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    if not loopback:
        print(f"hcu view: warning: listening on {host}, not loopback: whoever reaches it can read this run",
              file=sys.stderr)
    print(f"hcu view: {site.this.run_id} at http://{shown}:{port}/ (Ctrl-C stops)", flush=True)
    web.run_app(make_app(site, loopback_only=loopback), sock=sock, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
