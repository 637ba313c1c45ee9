"""A run directory as the summary reads it: its config, one row per repeat of each task, the tasks' repeats
grouped, and the summary.json built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.model import RunSummary
from hcu.osworld.summary.repeats import TaskScores
from hcu.osworld.summary.rows import AttemptRow


@dataclass
class Run:
    run_dir: Path
    config: RunConfig
    rows: list[AttemptRow]
    tasks: list[TaskScores]
    summary: RunSummary
    cost_note: str
    """At which prices the cost is, or why it is unknown (summary.md says it)."""
