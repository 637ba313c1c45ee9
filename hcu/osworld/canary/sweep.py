"""The canary sweep: `setup_canary` (setup, then the official evaluator on the untouched state) for every task
of an index, at most `max_parallel` at a time, resumable.

The sweep folder holds `sweep-state.json` (the settings the sweep runs with, its run id and the wall time of
each invocation), one canary per task in `tasks/<domain>/<task id>/report.json`, and the reports
(sweep_report.py). A task whose report is final is not run again; one that was interrupted (or never
reported) is, and so is one whose guest failed
(it says nothing about the task): at once, up to the error table's MAX_ATTEMPTS per invocation, and on every
resume. Canaries run on threads of this process: each worker keeps one OSWorld process and opens it on
each of its guests, so OSWorld's code (torch among its imports) loads once per worker, not once per task.
Guests carry the sweep's run id; a sweep that was killed leaves nothing behind once it runs again.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from pathlib import Path

import orjson
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from hcu.defaults import GUEST
from hcu.osworld.errors import MAX_ATTEMPTS, PhaseError
from hcu.osworld.osworld_bridge.process import OSWorldProcess, resolve_python
from hcu.osworld.settings import SAFE_NAME, AssetSettings, GuestSettings, OSWorldSettings
from hcu.osworld.setup_canary import REPORT_NAME, CanaryOptions, CanaryReport, run
from hcu.osworld.tasks import TaskDefinition, TaskError, load_task
from hcu.record_io import Record, read_record, write_record

log = logging.getLogger("hcu.sweep")

STATE_NAME = "sweep-state.json"
DEFAULT_PARALLEL = 3
INTERRUPTED = "interrupted"
RUNS_AGAIN = (INTERRUPTED, "guest")
"""Failure classes that say nothing about the task (stopped, or its guest never served it): it runs again."""


class SweepError(PhaseError):
    """The sweep cannot start: a bad index, folder or setting (one line)."""

    classification = "runner"


class SweepOptions(OSWorldSettings, AssetSettings, GuestSettings):
    out: Path
    """The sweep folder: reports, state and per-task canaries (created; an existing one is resumed)."""
    tasks_dir: Path
    """Folder of V1 task files (examples/<domain>/<id>.json)."""
    index: Path | None = None
    """Task index ({domain: [ids]}); default <tasks_dir>/test_all.json."""
    max_parallel: int = Field(default=DEFAULT_PARALLEL, ge=1)
    """Canaries running at once (each is one guest and, per worker, one OSWorld process)."""
    domains: list[str] | None = None
    """Only these domains of the index."""
    per_domain: int | None = Field(default=None, ge=1)
    """At most this many tasks per domain, in index order (CI: 1)."""
    task_ids: list[str] | None = None
    """Only these tasks of the index."""
    step_deadline: float = Field(default=300.0, gt=0)
    """Deadline of each setup step, in seconds."""
    boot_timeout: float = Field(default=GUEST.boot_timeout_sec, gt=0)
    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Label of the sweep's guests; default sweep-<hash of the folder>."""


class Invocation(BaseModel):
    started_at: float
    wall_sec: float = 0.0
    ran: int = 0
    interrupted: bool = False


class SweepState(Record):
    run_id: str
    settings: dict[str, object]
    """What shapes the results (guest, stand-ins, OSWorld interpreter): a resume must use the same."""
    invocations: list[Invocation] = []


def shaping_settings(opts: SweepOptions) -> dict[str, object]:
    keys = ("guest_image", "test_desktop", "guest_docker_image", "volume_size", "ram_size", "osworld_python",
            "asset_stand_ins", "asset_cache", "offline_assets", "tasks_dir")
    return orjson.loads(orjson.dumps({k: getattr(opts, k) for k in keys}, default=str))


def select_tasks(opts: SweepOptions) -> list[TaskDefinition]:
    """The index's tasks after the filters, in index order; every one must load (else one line, exit 2)."""
    index = opts.index or opts.tasks_dir / "test_all.json"
    try:
        listed = orjson.loads(index.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SweepError(f"--index: {index} is not a readable task index ({type(exc).__name__})") from None
    if not isinstance(listed, dict):
        raise SweepError(f"--index: {index} is not a task index ({{domain: [task ids]}})")
    wanted_ids = set(opts.task_ids or [])
    unknown = sorted(set(opts.domains or []) - set(listed))
    if unknown:
        raise SweepError(f"--domains: {', '.join(unknown)} not in {index} (it has {', '.join(sorted(listed))})")
    tasks = []
    for domain, ids in listed.items():
        if opts.domains and domain not in opts.domains:
            continue
        chosen = [task_id for task_id in ids if not wanted_ids or task_id in wanted_ids][:opts.per_domain]
        for task_id in chosen:
            try:
                tasks.append(load_task("v1", task_id, domain, opts.tasks_dir))
            except TaskError as exc:
                raise SweepError(f"--index: {exc}") from None
    missing = wanted_ids - {t.id for t in tasks}
    if missing:
        raise SweepError(f"--task-ids: {', '.join(sorted(missing))} not in {index}")
    return tasks


def report_path(out: Path, task: TaskDefinition) -> Path:
    return out / "tasks" / task.domain / task.id / REPORT_NAME


def read_report(path: Path) -> CanaryReport | None:
    """A task's canary report as it stands (None: missing or torn)."""
    try:
        return read_record(path, CanaryReport)
    except (OSError, ValueError, ValidationError):
        return None


def final_report(path: Path) -> CanaryReport | None:
    """A report that ends its task (None: missing, torn, or a class in RUNS_AGAIN: the task runs again)."""
    report = read_report(path)
    return None if report is None or report.failure_classification in RUNS_AGAIN else report


class Sweep:
    def __init__(self, opts: SweepOptions) -> None:
        self.opts = opts
        self.stop = threading.Event()
        self._processes: list[OSWorldProcess] = []
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self.ran = 0

    def run_id(self) -> str:
        return self.opts.run_id or "sweep-" + hashlib.sha256(str(self.opts.out.resolve()).encode()).hexdigest()[:10]

    def state(self) -> SweepState:
        path = self.opts.out / STATE_NAME
        settings = shaping_settings(self.opts)
        if path.is_file():
            state = read_record(path, SweepState)
            if state.settings != settings:
                changed = sorted(k for k in settings if settings[k] != state.settings.get(k))
                raise SweepError(f"{self.opts.out}: a sweep with other settings ran here ({', '.join(changed)} "
                                 "differ); use another --out")
            return state
        return SweepState(run_id=self.run_id(), settings=settings)

    def execute(self, tasks: list[TaskDefinition]) -> SweepState:
        """Run every task without a final report; returns the state with this invocation's wall time."""
        self.opts.out.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.opts.out / ".sweep.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise SweepError(f"{self.opts.out}: another sweep is running on this folder") from None
        try:
            state = self.state()
            invocation = Invocation(started_at=time.time())
            state.invocations.append(invocation)
            write_record(self.opts.out / STATE_NAME, state)
            self._remove_leftovers(state.run_id)
            pending: queue.Queue[TaskDefinition] = queue.Queue()
            for task in tasks:
                if final_report(report_path(self.opts.out, task)) is None:
                    pending.put(task)
            started = time.monotonic()
            workers = [threading.Thread(target=self._work, args=(n, pending, state.run_id), daemon=True)
                       for n in range(min(self.opts.max_parallel, pending.qsize()))]
            for worker in workers:
                worker.start()
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.5)  # wakes up for signals
            invocation.wall_sec = round(time.monotonic() - started, 1)
            invocation.ran, invocation.interrupted = self.ran, self.stop.is_set()
            write_record(self.opts.out / STATE_NAME, state)
            return state
        finally:
            lock.release()

    def interrupt(self) -> None:
        """Stop launching and end every OSWorld call in flight; running canaries end as interrupted."""
        self.stop.set()
        with self._lock:
            for process in self._processes:
                process.kill()

    def _remove_leftovers(self, run_id: str) -> None:
        from hcu.osworld.guest.removal import cleanup

        removed = cleanup(run_id=run_id, task_id=None, attempt=None).lines()
        if removed:
            log.warning("removed what an earlier invocation left: %s", "; ".join(removed))

    def _work(self, number: int, pending: queue.Queue[TaskDefinition], run_id: str) -> None:
        opts = self.opts
        process = OSWorldProcess(resolve_python(opts.osworld_python), work_dir=opts.out / ".osworld" / f"w{number}",
                                 secret=opts.client_password or "", what=f"sweep worker {number}")
        with self._lock:
            self._processes.append(process)
        try:
            while not self.stop.is_set():
                try:
                    task = pending.get_nowait()
                except queue.Empty:
                    return
                if self._canary(task, process, run_id) and not self.stop.is_set():
                    pending.put(task)
        finally:
            process.close()

    def _canary(self, task: TaskDefinition, process: OSWorldProcess, run_id: str) -> bool:
        """Run one canary; True when its guest failed and the task has attempts left in this invocation."""
        path = report_path(self.opts.out, task)
        fields = {k: getattr(self.opts, k) for k in CanaryOptions.model_fields if hasattr(self.opts, k)}
        canary = CanaryOptions.model_validate({**fields, "task_id": task.id, "task_domain": task.domain,
                                               "result_dir": path.parent, "run_evaluator": True,
                                               "run_id": run_id})
        report = run(canary, task, process)
        if self.stop.is_set() and report.status == "failed":
            report.failure_classification, report.error = INTERRUPTED, f"sweep stopped ({report.error})"
            write_record(path, report)
        with self._lock:
            self.ran += 1
            self._attempts[task.id] = attempts = self._attempts.get(task.id, 0) + 1
        log.info("%s/%s: %s%s", task.domain, task.id, report.status, f" ({report.error})" if report.error else "")
        return report.failure_classification in RUNS_AGAIN and attempts < MAX_ATTEMPTS
