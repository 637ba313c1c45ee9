"""The run as the viewer reads it: the run-level records once, one row per attempt folder from its result.json
(re-read only when that file changed), and each attempt's other records only when its page is asked for
(`attempt_data.py`).

Every record is read through its model (records.py) and tolerated when absent, torn or of another version: an old
run must open, a run in progress must open, and a record some other version of hcu wrote must not stop the page.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.records.layout import RESULT_FILE
from hcu.osworld.records.manifest import Manifest
from hcu.osworld.records.result import TaskResult
from hcu.osworld.run_config import RunConfig
from hcu.osworld.summary.model import RunSummary, SummaryUnreadable, parse_summary
from hcu.osworld.summary.rows import counted_score, failure_class, score_problem
from hcu.osworld.summary.waste import ValidResults, token_log_of
from hcu.osworld.view.records import M, RecordFile, read_json_file, read_record_file
from hcu.osworld.view.redact import Redactor
from hcu.osworld.view.timeline import RunTimeline, Timeline, run_provider

REPEAT_FOLDER = re.compile(r"^(?P<task>.+)\.r(?P<repeat>[0-9]+)$")
"""Repeat n >= 2 of a task lives in tasks/<task_id>.r<n>/ (repeat 1 in tasks/<task_id>/)."""
RETRY_FOLDER = re.compile(r"^(?P<key>.+)-(?P<attempt>[0-9]+)$")
"""retries/<task_id>[.r<n>]-<attempt>/."""


class RunDirError(HcuOSWorldError):
    """RUN_DIR is not a run directory; one line."""


def read_json(path: Path) -> Any:
    """A JSON file's value, or None when it is missing or not JSON."""
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def read_object(path: Path) -> dict[str, Any] | None:
    value = read_json(path)
    return value if isinstance(value, dict) else None


def split_key(key: str, known_tasks: set[str]) -> tuple[str, int]:
    """(task id, repeat) of a folder name: `<id>.r<n>` is repeat n of task <id> when <id> is a config task
    (a task id may itself hold dots)."""
    match = REPEAT_FOLDER.match(key)
    if match and match["task"] in known_tasks and int(match["repeat"]) >= 2:
        return match["task"], int(match["repeat"])
    return key, 1


def repeat_key(task_id: str, repeat: int) -> str:
    return task_id if repeat == 1 else f"{task_id}.r{repeat}"


@dataclass
class AttemptRow:
    """One scored attempt (a folder in tasks/) or a config task not started yet: what the index shows."""

    key: str
    """The folder name in tasks/ (the task id, `.r<n>` for repeat n)."""
    task_id: str
    repeat: int
    domain: str
    stratum: str = ""
    status: str = "not started"
    """completed, evaluator_error, error; "no result" (running, or its runner died), "unreadable", "not
    started"."""
    score: float | None = None
    """The score that counts (hcu's rules); None when withheld."""
    evaluator_score: float | None = None
    withheld_reason: str = ""
    termination: str = ""
    failure_class: str = ""
    failure_message: str = ""
    model_calls: int | None = None
    tokens: int | None = None
    """Input + output tokens, only when the gateway accounted for every generation."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    rate_limit_wait_sec: float | None = None
    duration_sec: float | None = None
    cost_usd: float | None = None
    """None: unknown (never read as zero)."""
    retries: int = 0
    phase: str = ""
    """For an attempt without a result: the phase its runner last reported."""
    getters_read_nothing: str = ""
    agent: str = ""
    model: str = ""
    started_at: float | None = None

    @property
    def valid(self) -> bool:
        return self.score is not None

    @property
    def ran(self) -> bool:
        """It left a result (readable or not)."""
        return self.status not in ("not started", "no result")


@dataclass
class SummaryFile:
    """summary/summary.json as the viewer read it."""

    summary: RunSummary | None
    """None when there is no summary.json or it does not read."""
    unknown: dict[str, Any] = field(default_factory=dict)
    """Top-level keys the model does not know (a newer summarize's), redacted, as they are."""
    problem: str | None = None
    """Why a summary.json that is there does not read (one line)."""


@dataclass
class RunIndex:
    rows: list[AttemptRow]
    retries: dict[str, list[str]]
    """Task folder key -> names of its set-aside attempts under retries/."""
    newest_result_mtime: float | None
    extra_folders: list[str] = field(default_factory=list)
    """Folders in tasks/ that name no config task."""


def _fill_from_result(row: AttemptRow, body: dict[str, Any]) -> None:
    try:
        result = TaskResult.model_validate(body)
    except ValidationError:
        row.status = "unreadable"
        return
    if problem := score_problem(result):  # summarize withholds it too
        row.status, row.withheld_reason = "unreadable", f"unreadable: {problem}"
        return
    row.status = result.status
    row.evaluator_score = result.evaluator_score if result.evaluator_score is not None else result.score
    row.score, row.withheld_reason = counted_score(result)
    row.termination = result.termination_reason or ""
    row.failure_class = failure_class(result) or ""
    row.failure_message = (result.failure_message or "").splitlines()[0][:300] if result.failure_message else ""
    row.duration_sec = result.duration_sec if result.duration_sec is not None else (
        result.finished_at - result.started_at if result.finished_at and result.started_at else None)
    row.started_at = result.started_at
    row.getters_read_nothing = ", ".join(g.getter for g in result.getters_read_nothing)
    row.agent, row.model = result.agent or "", result.model or ""
    row.domain = row.domain or result.task_domain or ""
    cost = body.get("cost_usd")
    row.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
    if result.usage is not None:
        usage = result.usage
        row.model_calls, row.rate_limit_wait_sec = usage.model_calls, usage.rate_limit_wait_sec
        if usage.fully_accounted:
            row.input_tokens, row.output_tokens = usage.input_tokens, usage.output_tokens
            row.tokens = usage.input_tokens + usage.output_tokens


def _progress_phase(folder: str) -> str:
    progress = read_object(Path(folder) / "progress.json")
    return str(progress.get("phase", "")) if progress else ""


class RunData:
    """One run directory, read lazily; safe to share between requests (rows are cached by result.json's
    size and modification time)."""

    def __init__(self, run_dir: Path) -> None:
        if not run_dir.is_dir():
            raise RunDirError(f"{run_dir}: not a directory")
        if not (run_dir / "config.json").is_file() and not (run_dir / "tasks").is_dir():
            raise RunDirError(f"{run_dir}: neither config.json nor tasks/ (not a run directory)")
        self.run_dir = run_dir.resolve()
        # the key file is taken from the file as it is, so that even a config that does not read is redacted
        key_file = (read_object(run_dir / "config.json") or {}).get("scope_key_file")
        self.redactor = Redactor.for_run(self.run_dir, [Path(key_file)] if isinstance(key_file, str) else [])
        self.config_file = self.read("config.json", RunConfig)
        self.config = self.config_file.record
        self._tasks = {task.id: task for task in self.config.tasks} if self.config else {}
        self._known = set(self._tasks)
        self._cache: dict[str, tuple[tuple[int, int], AttemptRow]] = {}
        self._summary: tuple[tuple[int, int], SummaryFile] | None = None
        """summary.json as last read, with the (mtime, size) it was read at: a page asks for it more than once."""
        self._timeline: RunTimeline | None = None

    @property
    def run_id(self) -> str:
        return (self.config.run_id if self.config else None) or self.run_dir.name

    def domain_of(self, task_id: str) -> str:
        spec = self._tasks.get(task_id)
        return (self.config.domain_of(spec) if self.config and spec else None) or ""

    def repeats(self) -> int:
        """Scored repeats per task: the config's, else the summary's, else 1."""
        if self.config is not None and "repeats" in self.config.model_fields_set:
            return self.config.repeats
        summary = self.summary()
        return summary.repeats if summary is not None and summary.repeats and summary.repeats >= 1 else 1

    def record(self, relative: str) -> dict[str, Any] | None:
        """A JSON object of the run, redacted; None when missing or not an object."""
        value = read_object(self.run_dir / relative)
        return None if value is None else self.redactor.value(value)

    def read(self, relative: str, model: type[M]) -> RecordFile[M]:
        """A record of the run through its model, redacted (records.py)."""
        return read_record_file(self.run_dir / relative, model, self.redactor.value, relative)

    def summary_file(self) -> SummaryFile:
        """summary.json read through the summary's model (redacted first), again only once the file changed; a torn
        or foreign one says why."""
        path = self.run_dir / "summary" / "summary.json"
        try:
            stat = path.stat()
        except OSError:
            return self._read_summary(path)  # missing or unreadable: said so, nothing kept
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._summary is None or self._summary[0] != stamp:
            self._summary = (stamp, self._read_summary(path))
        return self._summary[1]

    def _read_summary(self, path: Path) -> SummaryFile:
        found = read_json_file(path, "summary/summary.json")
        if found is None or found[1] is not None:
            return SummaryFile(None, problem=found and found[1])
        try:
            summary, unknown = parse_summary(self.redactor.value(found[0]))
        except SummaryUnreadable as exc:
            return SummaryFile(None, problem=self.redactor.text(f"summary/summary.json: {exc}"))
        return SummaryFile(summary, unknown)

    def summary(self) -> RunSummary | None:
        return self.summary_file().summary

    def summary_mtime(self) -> float | None:
        try:
            return (self.run_dir / "summary" / "summary.json").stat().st_mtime
        except OSError:
            return None

    def manifest_file(self) -> RecordFile[Manifest]:
        return self.read("manifest.json", Manifest)

    def manifest(self) -> Manifest | None:
        return self.manifest_file().record

    def queue_status(self) -> str | None:
        try:
            return self.redactor.text((self.run_dir / "QUEUE_STATUS.md").read_text(errors="replace"))
        except OSError:
            return None

    def retries(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        try:
            entries = sorted(os.scandir(self.run_dir / "retries"), key=lambda e: e.name)
        except FileNotFoundError:
            return found
        for entry in entries:
            match = RETRY_FOLDER.match(entry.name)
            if match and entry.is_dir():
                found.setdefault(match["key"], []).append(entry.name)
        return found

    def _row_from_result(self, folder: str, row: AttemptRow) -> tuple[AttemptRow, float | None]:
        """`row` filled from the folder's result.json (validated once per version of the file), and its mtime."""
        path = os.path.join(folder, RESULT_FILE)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            if os.path.isdir(folder):
                row.status, row.phase = "no result", _progress_phase(folder)
            return row, None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(path)
        if cached is None or cached[0] != stamp:
            try:
                with open(path, "rb") as f:
                    body = orjson.loads(f.read())
            except (OSError, orjson.JSONDecodeError):
                body = None
            filled = dataclasses.replace(row)
            if isinstance(body, dict):
                filled.repeat = body["repeat"] if isinstance(body.get("repeat"), int) else row.repeat
                _fill_from_result(filled, body)
            else:
                filled.status = "unreadable"
            filled.failure_message = self.redactor.text(filled.failure_message)  # shown in the index
            filled.withheld_reason = self.redactor.text(filled.withheld_reason)
            cached = self._cache[path] = (stamp, filled)
        return dataclasses.replace(cached[1], retries=row.retries), stat.st_mtime

    def row_at(self, area: str, name: str, retries: int = 0) -> tuple[AttemptRow, float | None]:
        """The row of `area/name` (tasks/<key> or retries/<key>-<n>) and its result's mtime; a row "not started"
        when the folder does not exist."""
        match = RETRY_FOLDER.match(name) if area == "retries" else None
        task_id, repeat = split_key(match["key"] if match else name, self._known)
        spec = self._tasks.get(task_id)
        row = AttemptRow(key=name, task_id=task_id, repeat=repeat, domain=self.domain_of(task_id),
                         stratum=(spec.stratum if spec else None) or "", retries=retries)
        return self._row_from_result(os.path.join(self.run_dir, area, name), row)

    def index(self) -> RunIndex:
        """Every expected attempt (config task x repeat) and every attempt folder, in config order."""
        try:
            folders = {entry.name for entry in os.scandir(self.run_dir / "tasks") if entry.is_dir()}
        except FileNotFoundError:
            folders = set()
        retries = self.retries()
        repeats = self.repeats()
        expected = [repeat_key(task, n) for task in self._tasks for n in range(1, repeats + 1)]
        extra = sorted(folders - set(expected))
        foreign = [key for key in extra if split_key(key, self._known)[0] not in self._known]
        rows, newest = [], None
        for key in expected + [key for key in extra if key not in foreign] + foreign:
            row, mtime = self.row_at("tasks", key, len(retries.get(key, [])))
            rows.append(row)
            if mtime is not None and (newest is None or mtime > newest):
                newest = mtime
        return RunIndex(rows=rows, retries=retries, newest_result_mtime=newest, extra_folders=foreign)

    def timeline(self, index: RunIndex) -> Timeline | None:
        """The run over its time (queue events, token-log minutes), the attempts' validity as `index` has it."""
        if self._timeline is None:
            token_log = token_log_of(self.run_dir, self.config.token_log if self.config else None)
            self._timeline = RunTimeline(self.run_dir, token_log, self.run_id, run_provider(self.config) or "")
        names = (name for folders in index.retries.values() for name in folders)
        return self._timeline.timeline(ValidResults.of(self.run_id, self._tasks, index.rows, names))

    def redacted_text(self, path: Path) -> str:
        return self.redactor.text(path.read_text(errors="replace"))
