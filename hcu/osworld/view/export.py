"""The static export: the same pages as files that open from disk (file://), with the run files they show.

Layout of OUT_DIR: index.html; tasks/<task folder>.html (the file name holds the task id, `.r<n>` for repeat
n) and retries/<name>.html; with a compared run compare.html, compare/<task folder>.html and other/...; the run
files the pages link to under files/ (other/files/), text redacted as the server redacts it; static/ for the
viewer's CSS and JS. A marker file lets a later export replace an earlier one, and nothing else.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.view.data import RunData
from hcu.osworld.view.links import ExportLinks, Side
from hcu.osworld.view.paths import PathRefused, is_text, resolve_in_run
from hcu.osworld.view.site import STATIC_FILES, Site, static_bytes
from hcu.record_io import write_atomic

MARKER = ".hcu-view-export"


class ExportError(HcuOSWorldError):
    """OUT_DIR cannot take an export; one line."""


@dataclass
class ExportReport:
    pages: int
    files: int
    refused: int
    """Files a page links to that the export left out (a path that leaves the run, a key file)."""


def check_out_dir(out: Path, runs: list[RunData]) -> None:
    """OUT_DIR is new, empty or an earlier export, and outside every run viewed."""
    resolved = out.resolve()
    for run in runs:
        if resolved.is_relative_to(run.run_dir) or run.run_dir.is_relative_to(resolved):
            raise ExportError(f"--export: {out} overlaps the run directory {run.run_dir}; choose a folder outside it")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise ExportError(f"--export: {out} exists and is not an empty folder or an earlier export")


class _Writer:
    def __init__(self, out: Path) -> None:
        self.out, self.pages = out, 0
        self.wanted: set[tuple[Side, str]] = set()

    def links(self, depth: int) -> ExportLinks:
        return ExportLinks(depth, self.wanted)

    def page(self, relative: str, html: str | None) -> None:
        if html is not None:
            write_atomic(self.out / relative, html.encode())
            self.pages += 1


def _attempt_pages(site: Site, writer: _Writer, side: Side) -> None:
    run = site.run(side)
    assert run is not None
    prefix = "" if side == "this" else "other/"
    depth = 1 if side == "this" else 2
    for row in run.index().rows:
        if row.status != "not started":
            writer.page(f"{prefix}tasks/{row.key}.html", site.attempt(side, "tasks", row.key, writer.links(depth)))
    for names in run.retries().values():
        for name in names:
            writer.page(f"{prefix}retries/{name}.html", site.attempt(side, "retries", name, writer.links(depth)))


def _copy_files(site: Site, writer: _Writer) -> tuple[int, int]:
    copied = refused = 0
    for side, relative in sorted(writer.wanted):
        run = site.run(side)
        assert run is not None
        try:
            source = resolve_in_run(run.run_dir, relative)
        except PathRefused:
            refused += 1
            continue
        target = writer.out / ("" if side == "this" else "other") / "files" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if is_text(source):
            data = source.read_bytes()
            write_atomic(target, run.redactor.json_text(data) if source.suffix in (".json", ".jsonl")
                         else run.redactor.bytes(data))
        else:
            shutil.copyfile(source, target)
        copied += 1
    return copied, refused


def export(site: Site, out: Path) -> ExportReport:
    check_out_dir(out, [run for run in (site.this, site.other) if run is not None])
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by python -m hcu.osworld.view --export\n")
    for name in STATIC_FILES:
        write_atomic(out / "static" / name, static_bytes(name))
    writer = _Writer(out)
    writer.page("index.html", site.index(writer.links(0)))
    _attempt_pages(site, writer, "this")
    if site.other is not None:
        _attempt_pages(site, writer, "other")
        writer.page("compare.html", site.compare(writer.links(0)))
        keys = {row.key for run in (site.this, site.other) for row in run.index().rows if row.status != "not started"}
        for key in sorted(keys):
            writer.page(f"compare/{key}.html", site.compare_task(key, writer.links(1)))
    copied, refused = _copy_files(site, writer)
    return ExportReport(pages=writer.pages, files=copied, refused=refused)
