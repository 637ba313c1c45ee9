"""Where a page's links point: the served viewer's URLs, or the static export's relative file names.

Pages are rendered once for both (`index_page`, `task_page`, `compare_page`); only this object differs. The
export's links also collect every run file a page refers to, so the export copies exactly those.
"""

from __future__ import annotations

from typing import Literal, Protocol
from urllib.parse import quote

Side = Literal["this", "other"]
"""Which run a link belongs to: the one viewed, or the one it is compared with (`--compare`)."""


class Links(Protocol):
    def index(self) -> str: ...
    def attempt(self, side: Side, area: str, name: str) -> str: ...
    def compare(self) -> str: ...
    def compare_task(self, key: str) -> str: ...
    def file(self, side: Side, relative: str) -> str: ...
    def static(self, name: str) -> str: ...


def _segment(name: str) -> str:
    return quote(name, safe="")


def _path(relative: str) -> str:
    return quote(relative, safe="/")


def _run_prefix(side: Side) -> str:
    return "" if side == "this" else "other/"


class ServedLinks:
    """URLs of the aiohttp server (`server.py` routes the same shapes)."""

    def index(self) -> str:
        return "/"

    def attempt(self, side: Side, area: str, name: str) -> str:
        return f"/{_run_prefix(side)}{area}/{_segment(name)}"

    def compare(self) -> str:
        return "/compare"

    def compare_task(self, key: str) -> str:
        return f"/compare/{_segment(key)}"

    def file(self, side: Side, relative: str) -> str:
        return f"/{_run_prefix(side)}files/{_path(relative)}"

    def static(self, name: str) -> str:
        return f"/static/{name}"


class ExportLinks:
    """Relative file names of the static export, from a page `depth` folders below the export's root; the files
    linked are noted in `wanted` (side, run-relative path) for the export to copy."""

    def __init__(self, depth: int, wanted: set[tuple[Side, str]]) -> None:
        self.up = "../" * depth
        self.wanted = wanted

    def index(self) -> str:
        return f"{self.up}index.html"

    def attempt(self, side: Side, area: str, name: str) -> str:
        return f"{self.up}{_run_prefix(side)}{area}/{_segment(name)}.html"

    def compare(self) -> str:
        return f"{self.up}compare.html"

    def compare_task(self, key: str) -> str:
        return f"{self.up}compare/{_segment(key)}.html"

    def file(self, side: Side, relative: str) -> str:
        self.wanted.add((side, relative))
        return f"{self.up}{_run_prefix(side)}files/{_path(relative)}"

    def static(self, name: str) -> str:
        return f"{self.up}static/{name}"
