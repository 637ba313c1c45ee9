"""The official OSWorld task files vendored for the tests (see osworld_tasks/SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

import orjson

OFFICIAL_TASKS = Path(__file__).resolve().parent / "osworld_tasks"
"""A V1 tasks folder: examples/<domain>/<id>.json and the test_all.json index."""


def official_task(domain: str, task_id: str) -> dict:
    """One vendored task file's JSON."""
    return orjson.loads((OFFICIAL_TASKS / "examples" / domain / f"{task_id}.json").read_bytes())
