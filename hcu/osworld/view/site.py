"""What the served viewer and the static export share: the runs being viewed and how each page is made from
them, whatever its links are."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from hcu.osworld.view.attempt_data import Area, read_attempt
from hcu.osworld.view.compare import compare_runs
from hcu.osworld.view.compare_page import render_compare, render_compare_task
from hcu.osworld.view.data import RunData
from hcu.osworld.view.index_page import render_index
from hcu.osworld.view.links import Links, Side
from hcu.osworld.view.task_page import render_task

STATIC_FILES = ("viewer.css", "viewer.js")
"""The viewer's own stylesheet and script: every page uses these and nothing from the network."""


def static_bytes(name: str) -> bytes:
    return resources.files("hcu.osworld.view").joinpath("static", name).read_bytes()


@dataclass
class Site:
    this: RunData
    other: RunData | None = None

    def run(self, side: Side) -> RunData | None:
        return self.this if side == "this" else self.other

    def index(self, links: Links) -> str:
        return render_index(self.this, links, compare_with=self.other.run_id if self.other else None)

    def attempt(self, side: Side, area: Area, name: str, links: Links) -> str | None:
        run = self.run(side)
        detail = read_attempt(run, area, name) if run is not None else None
        if run is None or detail is None:
            return None
        return render_task(run, detail, links, side=side, compare=self.other is not None)

    def compare(self, links: Links) -> str | None:
        if self.other is None:
            return None
        this_index, other_index = self.this.index(), self.other.index()
        return render_compare(self.this, self.other, this_index, other_index,
                              compare_runs(this_index, other_index), links)

    def compare_task(self, key: str, links: Links) -> str | None:
        if self.other is None:
            return None
        left, right = read_attempt(self.this, "tasks", key), read_attempt(self.other, "tasks", key)
        if left is None and right is None:
            return None
        return render_compare_task(self.this, self.other, key, left, right, links)
