"""One attempt folder (tasks/<key>/ or retries/<name>/) read in full, for its page: result, lease, retry note and
meta.json (the last three through their models), the trajectory and its screenshots, the CLI's events, final
screenshots, the recording, logs and the folder's files. Every text is redacted here, before any page sees it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from hcu.osworld.agents.events import TraceItem
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.evidence.atif import Trajectory
from hcu.osworld.queue.state import RetryNote
from hcu.osworld.records.layout import LEASE_FILE, META_FILE, RETRY_FILE, TRAJECTORY_FILE
from hcu.osworld.records.lease import AttemptLease
from hcu.osworld.view.data import AttemptRow, RunData
from hcu.osworld.view.paths import REFUSED_DIRS, PathRefused, check_relative
from hcu.osworld.view.records import RecordFile

Area = Literal["tasks", "retries"]
LOG_TAIL_BYTES = 64 << 10
"""A page shows the end of each log; the whole (redacted) file is a link away."""
FINAL_SCREENSHOTS = (("before evaluation", "final-before-eval.png"), ("after evaluation", "final-after-eval.png"))
RECORDING = "recording.mp4"


@dataclass
class LogTail:
    label: str
    path: str
    """Run-relative."""
    size: int
    text: str
    """The last LOG_TAIL_BYTES, redacted."""

    @property
    def truncated(self) -> bool:
        return self.size > LOG_TAIL_BYTES


@dataclass
class FolderEntry:
    path: str
    """Run-relative."""
    size: int
    files_inside: int | None = None
    """For a folder: how many files it holds."""


@dataclass
class AttemptDetail:
    area: Area
    name: str
    row: AttemptRow
    result: dict[str, Any] | None
    lease: RecordFile[AttemptLease]
    retry_note: RecordFile[RetryNote]
    meta: RecordFile[AttemptMeta]
    trajectory: Trajectory | None
    trajectory_problem: str | None
    """Why there is no trajectory to show: absent, or unreadable (and why)."""
    events: list[TraceItem]
    """agent.jsonl's items (the CLI's events, normalised): the steps when there is no trajectory."""
    final_screenshots: list[tuple[str, str]]
    recording: str | None
    logs: list[LogTail]
    files: list[FolderEntry]
    retried: list[tuple[AttemptRow, RetryNote | None]] = field(default_factory=list)
    """For a task folder: its attempts set aside under retries/ (row, retry note)."""

    @property
    def folder(self) -> str:
        return f"{self.area}/{self.name}"

    @property
    def instruction(self) -> str | None:
        if self.trajectory is None:
            return None
        return next((step.message for step in self.trajectory.steps if step.source == "user"), None)


def _tail(run: RunData, label: str, relative: str) -> LogTail | None:
    path = run.run_dir / relative
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            f.seek(max(0, size - LOG_TAIL_BYTES))
            data = f.read()
    except OSError:
        return None
    return LogTail(label, relative, size, run.redactor.text(data.decode("utf-8", "replace")))


def _listing(run: RunData, folder: str) -> list[FolderEntry]:
    entries = []
    try:
        found = sorted(os.scandir(run.run_dir / folder), key=lambda e: (e.is_dir(), e.name))
    except OSError:
        return entries
    for entry in found:
        relative = f"{folder}/{entry.name}"
        if entry.is_dir(follow_symlinks=False) and entry.name not in REFUSED_DIRS:
            inside = sum(len(files) for _, _, files in os.walk(entry.path))
            entries.append(FolderEntry(relative, 0, inside))
        elif entry.is_file(follow_symlinks=False) and _servable(relative):
            entries.append(FolderEntry(relative, entry.stat().st_size))
    return entries


def _servable(relative: str) -> bool:
    try:
        check_relative(relative)
    except PathRefused:
        return False
    return True


def _trajectory(run: RunData, folder: str) -> tuple[Trajectory | None, str | None]:
    path = run.run_dir / folder / TRAJECTORY_FILE
    try:
        body = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None, f"no {TRAJECTORY_FILE} in {folder}/ (recorded by runs with step evidence on)"
    except (OSError, orjson.JSONDecodeError) as exc:
        return None, f"{TRAJECTORY_FILE} is not JSON ({type(exc).__name__})"
    try:
        return Trajectory.model_validate(run.redactor.value(body)), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return None, f"{TRAJECTORY_FILE} does not read as ATIF: {where}: {first['msg']}"


def _events(run: RunData, folder: str) -> list[TraceItem]:
    """agent.jsonl's items, redacted; a line that is not one is left out."""
    try:
        data = (run.run_dir / folder / "agent.jsonl").read_bytes()
    except OSError:
        return []
    items = []
    for line in data.splitlines():
        try:
            items.append(TraceItem.model_validate(run.redactor.value(orjson.loads(line))))
        except (orjson.JSONDecodeError, ValidationError):
            continue
    return items


def _logs(run: RunData, area: Area, name: str) -> list[LogTail]:
    folder = f"{area}/{name}"
    wanted = [("runner log", f"logs/{name}.log" if area == "tasks" else f"{folder}/runner.log")]
    base = run.run_dir / folder
    wanted += [(f"agent turn {p.name.split('-')[3]} stderr", f"{folder}/{p.name}")
               for p in sorted(base.glob("phase-agent-turn-*-stderr.log"))]
    wanted += [(f"guest console ({p.name})", f"{folder}/.guest/{p.name}")
               for p in sorted((base / ".guest").glob("*.console.log"))]
    return [tail for label, relative in wanted if (tail := _tail(run, label, relative)) is not None]


def _retried(run: RunData, key: str) -> list[tuple[AttemptRow, RetryNote | None]]:
    return [(run.row_at("retries", name)[0], run.read(f"retries/{name}/{RETRY_FILE}", RetryNote).record)
            for name in run.retries().get(key, [])]


def read_attempt(run: RunData, area: Area, name: str) -> AttemptDetail | None:
    """The attempt in `area/name`, or None when there is no such folder (or the name is not one)."""
    try:
        check_relative(f"{area}/{name}/result.json")
    except PathRefused:
        return None
    folder = f"{area}/{name}"
    base = run.run_dir / folder
    if not base.is_dir() or not base.resolve().is_relative_to(run.run_dir):
        return None
    row, _ = run.row_at(area, name)
    trajectory, problem = _trajectory(run, folder)
    return AttemptDetail(
        area=area, name=name, row=row, result=run.record(f"{folder}/result.json"),
        lease=run.read(f"{folder}/{LEASE_FILE}", AttemptLease),
        retry_note=run.read(f"{folder}/{RETRY_FILE}", RetryNote), meta=run.read(f"{folder}/{META_FILE}", AttemptMeta),
        trajectory=trajectory, trajectory_problem=problem, events=_events(run, folder),
        final_screenshots=[(label, f"{folder}/{file}") for label, file in FINAL_SCREENSHOTS
                           if (base / file).is_file()],
        recording=f"{folder}/{RECORDING}" if (base / RECORDING).is_file() else None,
        logs=_logs(run, area, name), files=_listing(run, folder),
        retried=_retried(run, name) if area == "tasks" else [])

