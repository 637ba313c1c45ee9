"""sweep.json as a model: the rows the canary sweep writes (canary/sweep_report.py builds them with it) and the
file read back by what uses a sweep's findings elsewhere (a run's do-nothing baseline: the summary and the run
config's `baseline` key). Light on purpose: reading a sweep loads neither the sweep's workers nor OSWorld."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from hcu.defaults import BenchmarkVersion
from hcu.flags import describe_error
from hcu.osworld.errors import HcuOSWorldError

SWEEP_FILE = "sweep.json"
SWEPT_VERSION: BenchmarkVersion = "v1"
"""The task set the sweep loads its tasks from (its index holds V1 task files)."""


class SweepUnreadable(HcuOSWorldError):
    """A folder that is not a canary sweep's, or whose sweep.json does not read; one line."""


class SweepTask(BaseModel):
    """One task of the sweep: its canary's outcome (a task the sweep has not run yet has only the first three)."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    task_id: str
    domain: str
    outcome: str
    """"passed", "evaluated, getter read nothing", "failed (<class>)" or "not run"."""
    status: Literal["passed", "failed"] | None = None
    evaluated: bool = False
    """Setup passed and the official evaluator returned a score for the untouched state."""
    feasible: bool | None = None
    """False for a task whose evaluator is OSWorld's `infeasible` rule."""
    score: float | None = None
    """The evaluator's score of the untouched state; None when it was not evaluated."""
    failure_classification: str | None = None
    error: str | None = None
    """The failure's first line."""
    duration_sec: float | None = None
    stand_ins: bool = False
    """The task's files were generated stand-ins."""
    nonzero_exits: int = 0
    """Setup commands that exited nonzero."""
    getters_read_nothing: list[str] | None = None
    """Evaluated tasks only: the getters that read nothing of the state."""


class SweepFile(BaseModel):
    """sweep.json (the keys a reader needs; the totals per domain are left to the file)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    settings: dict[str, Any] = {}
    stand_ins: bool = False
    tasks: list[SweepTask]

    def guest(self) -> str:
        """The guest the sweep ran on, as its settings name it."""
        if self.settings.get("test_desktop"):
            return "test desktop"
        return str(self.settings.get("guest_image") or self.settings.get("guest_docker_image") or "unknown")


def read_sweep(sweep_dir: Path) -> SweepFile:
    """A canary sweep's folder read through its sweep.json; SweepUnreadable (one line) when it is not one."""
    path = sweep_dir / SWEEP_FILE
    if not sweep_dir.is_dir():
        raise SweepUnreadable(f"{sweep_dir}: not a folder (expected a canary sweep's folder holding {SWEEP_FILE})")
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise SweepUnreadable(f"{sweep_dir}: no {SWEEP_FILE} (not a canary sweep's folder; "
                              "python -m hcu.osworld.canary_sweep writes one)") from None
    except OSError as exc:
        raise SweepUnreadable(f"{path}: cannot be read ({exc.strerror})") from None
    except orjson.JSONDecodeError as exc:
        raise SweepUnreadable(f"{path}: not JSON ({exc})") from None
    try:
        return SweepFile.model_validate(data)
    except ValidationError as exc:
        raise SweepUnreadable(f"{path}: {describe_error(exc)}") from None
