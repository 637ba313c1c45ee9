"""Reading a finished run for the Ray executor tests: where each attempt ran, and what ran at once on a node."""

from __future__ import annotations

from pathlib import Path

import orjson

from hcu.osworld.attempt.node_admission import PHASE_GROUPS

ROUNDING_SEC = 0.001
"""result.json keeps durations to the millisecond, so a recorded end can pass the next start by that much."""


def manifest(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "manifest.json").read_bytes())


def results(run_dir: Path) -> list[dict]:
    return [orjson.loads(path.read_bytes()) for path in sorted(run_dir.glob("tasks/*/result.json"))]


def group_spans(result: dict) -> dict[str, tuple[float, float]]:
    """Per capped group, from the first of its phases' start to the last one's recorded end."""
    spans: dict[str, tuple[float, float]] = {}
    for phase in result["phases"]:
        group = PHASE_GROUPS.get(phase["name"])
        if group is None or phase["status"] == "skipped":
            continue
        start, end = phase["started_at"], phase["started_at"] + phase["duration_sec"]
        first, _ = spans.get(group, (start, end))
        spans[group] = (min(first, start), end)
    return spans


def peak_overlap(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one moment (an end and a start at the same instant do not overlap)."""
    marks = sorted([(start + ROUNDING_SEC, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in marks:
        running += step
        peak = max(peak, running)
    return peak


def peaks_by_node(run_dir: Path) -> dict[str, dict[str, int]]:
    """node -> group -> the most attempts of that node in the group at once, from the recorded phases."""
    nodes = manifest(run_dir)["attempt_nodes"]
    spans: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for result in results(run_dir):
        node = nodes[result["attempt_id"]]
        for group, span in group_spans(result).items():
            spans.setdefault(node, {}).setdefault(group, []).append(span)
    return {node: {group: peak_overlap(found) for group, found in groups.items()} for node, groups in spans.items()}
