"""The canary sweep: `setup_canary` (setup, then the official evaluator on the untouched state) for every task
of an index, at most `max_parallel` at a time, resumable.

The sweep folder holds `sweep-state.json` (the settings the sweep runs with, its run id and the wall time of
each invocation), one canary per task in `tasks/<domain>/<task id>/report.json`, and the reports
(sweep_report.py). A task whose report is final is not run again; one that was interrupted (or never
reported) is, and so is one whose guest failed
(the error table says it is not about the task): at once, up to `RETRIES.attempts` (hcu.defaults) per invocation,
and on every resume. Canaries run in `max_parallel` worker processes, each the attempt runner's main thread
(so phase deadlines and stop signals work as in run_task); each worker keeps one OSWorld process and opens it
on each of its guests, so OSWorld's code (torch among its imports) loads once per worker, not once per task. A
stop signal reaches every worker (and a dead sweep's workers get SIGTERM from the kernel): running canaries end
as `interrupted` with their guests removed. Guests carry the sweep's run id; a sweep that was killed leaves
nothing behind once it runs again.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import multiprocessing
import os
import queue
import signal
import time
from pathlib import Path

import orjson
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from hcu.defaults import GUEST, RETRIES
from hcu.osworld.canary.attempt import REPORT_NAME, CanaryOptions, CanaryReport, run
from hcu.osworld.errors import PhaseError, policy_for
from hcu.osworld.osworld_bridge.process import OSWorldProcess, resolve_python
from hcu.osworld.osworld_bridge.tasks import TaskDefinition, TaskError, load_task
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.sweep_file import SWEPT_VERSION
from hcu.osworld.settings import SAFE_NAME, GuestAttemptSettings
from hcu.osworld.stand_ins.asset_source import asset_source
from hcu.record_io import Record, read_record, write_record

log = logging.getLogger("hcu.sweep")

STATE_NAME = "sweep-state.json"
DEFAULT_PARALLEL = 3
PR_SET_PDEATHSIG = 1


class SweepError(PhaseError):
    """The sweep cannot start: a bad index, folder or setting (one line)."""

    classification = "runner"


class SweepOptions(GuestAttemptSettings):
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
    boot_timeout: float = Field(default=GUEST.boot_timeout_sec, gt=0)
    """Seconds a guest may take to become ready."""
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
                tasks.append(load_task(SWEPT_VERSION, task_id, domain, opts.tasks_dir))
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


def runs_again(report: CanaryReport) -> bool:
    """A canary whose failure says nothing about its task (its guest never served it, the sweep stopped)."""
    return report.status == "failed" and not policy_for(report.failure_classification).about_task


def final_report(path: Path) -> CanaryReport | None:
    """A report that ends its task (None: missing, torn, or one that `runs_again`)."""
    report = read_report(path)
    return None if report is None or runs_again(report) else report


class Sweep:
    def __init__(self, opts: SweepOptions) -> None:
        self.opts = opts
        self.ran = 0
        self._stopping = False
        self._workers: list[multiprocessing.process.BaseProcess] = []

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
            pending = [task for task in tasks if final_report(report_path(self.opts.out, task)) is None]
            started = time.monotonic()
            self._dispatch(pending, state.run_id)
            invocation.wall_sec = round(time.monotonic() - started, 1)
            invocation.ran, invocation.interrupted = self.ran, self._stopping
            write_record(self.opts.out / STATE_NAME, state)
            return state
        finally:
            lock.release()

    def interrupt(self) -> None:
        """Stop launching; every running canary ends as interrupted (its worker gets SIGTERM)."""
        self._stopping = True
        for worker in self._workers:
            if worker.pid is not None and worker.is_alive():
                os.kill(worker.pid, signal.SIGTERM)

    def _dispatch(self, pending: list[TaskDefinition], run_id: str) -> None:
        """Feed the tasks to the workers; a canary that `runs_again` goes back in line while it has attempts."""
        if not pending:
            return
        context = multiprocessing.get_context("fork")  # a worker inherits the sweep's settings and code as loaded
        jobs, done = context.Queue(), context.Queue()
        by_id = {task.id: task for task in pending}
        attempts = dict.fromkeys(by_id, 0)
        for task in pending:
            jobs.put(task.id)
        outstanding = len(pending)
        self._workers = [context.Process(target=_work, args=(n, self.opts, by_id, run_id, jobs, done), daemon=True)
                         for n in range(min(self.opts.max_parallel, len(pending)))]
        for worker in self._workers:
            worker.start()
        while outstanding and not self._stopping and any(w.is_alive() for w in self._workers):
            try:
                task_id, again = done.get(timeout=0.5)  # wakes up for signals
            except queue.Empty:
                continue
            self.ran += 1
            attempts[task_id] += 1
            if again and attempts[task_id] < RETRIES.attempts and not self._stopping:
                jobs.put(task_id)
            else:
                outstanding -= 1
        for _ in self._workers:
            jobs.put(None)
        for worker in self._workers:
            worker.join()

    def _remove_leftovers(self, run_id: str) -> None:
        from hcu.osworld.guest.removal import cleanup

        removed = cleanup(run_id=run_id, task_id=None, attempt=None).lines()
        if removed:
            log.warning("removed what an earlier invocation left: %s", "; ".join(removed))


def _work(number: int, opts: SweepOptions, tasks: dict[str, TaskDefinition], run_id: str,
          jobs: multiprocessing.Queue, done: multiprocessing.Queue) -> None:
    """A worker process: canaries one after another on one OSWorld process, until told to stop."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # a dead sweep's canaries end as interrupted
    stops = StopSignals().install()
    process = OSWorldProcess(resolve_python(opts.osworld_python), work_dir=opts.out / ".osworld" / f"w{number}",
                             secret=opts.client_password or "", what=f"sweep worker {number}")
    try:
        while not stops.received and (task_id := jobs.get()) is not None:
            task = tasks[task_id]
            report = run(canary_options(opts, task, run_id), asset_source=asset_source, stops=stops, osworld=process)
            log.info("%s/%s: %s%s", task.domain, task.id, report.status, f" ({report.error})" if report.error else "")
            done.put((task_id, runs_again(report)))
    finally:
        process.close()


def canary_options(opts: SweepOptions, task: TaskDefinition, run_id: str) -> CanaryOptions:
    """One task's canary as the sweep runs it: setup, then the evaluator on the untouched state."""
    fields = {k: getattr(opts, k) for k in CanaryOptions.model_fields if hasattr(opts, k)}
    return CanaryOptions.model_validate({**fields, "task_id": task.id, "task_domain": task.domain,
                                         "result_dir": report_path(opts.out, task).parent, "run_evaluator": True,
                                         "run_id": run_id})
