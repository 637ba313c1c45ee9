"""python -m hcu.osworld.setup_canary: start a guest, run one task's setup without agent or model, write
report.json, remove the guest. It also fills the asset cache, so a later `--offline-assets` run needs no
network. With --run-evaluator the report holds the official evaluator's score of the untouched state.

A canary cannot pass a broken setup: a guest answer that is not a success fails its step (as in run_task);
after `launch`, `open` and `chrome_open_tabs` the application must really be there (canary/apps.py); and a
getter that read nothing of the guest's state fails the canary ("the evaluator could not read the state").

Exit status: 0 passed, 1 failed (report.json says why), 2 bad flags (one line, nothing started).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from hcu.defaults import BENCHMARKS, GUEST
from hcu.flags import OneLineParser, add_flags, parse_flags
from hcu.osworld.attempt.app_check import APP_START_SEC, AppCheck
from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.errors import EvaluatorError, PhaseError
from hcu.osworld.guest.readiness import ReadinessStep
from hcu.osworld.osworld_bridge import stand_ins
from hcu.osworld.osworld_bridge.assets import AssetCache, AssetError, stand_in_cache
from hcu.osworld.osworld_bridge.evaluate import EvalResult, ensure_evaluator_loads, evaluate
from hcu.osworld.osworld_bridge.process import OSWorldProcess
from hcu.osworld.osworld_bridge.setup import (
    SetupStepError,
    SetupStepRecord,
    osworld_process,
    run_setup,
    task_cache_dir,
)
from hcu.osworld.settings import SAFE_NAME, AssetSettings, GuestSettings, OSWorldSettings, TaskSettings
from hcu.osworld.tasks import TaskDefinition, TaskError, load_task
from hcu.record_io import Record, write_record

REPORT_NAME = "report.json"


class CanaryReport(Record):
    status: Literal["passed", "failed"]
    benchmark_version: str
    task_id: str
    task_domain: str
    task_sha256: str
    guest_kind: str
    guest_image: str
    volume_size_gb: int
    desktop_env: str | None = None
    """The OSWorld code that ran setup and evaluation (its `desktop_env` package directory)."""
    osworld_python: str | None = None
    """The interpreter of the OSWorld process."""
    hcu: str | None = None
    """The hcu checkout whose code the OSWorld process ran."""
    stand_ins: bool = False
    """The task's files were generated stand-ins (`--asset-stand-ins`), not the real ones."""
    readiness: list[ReadinessStep] = []
    console_log: str | None = None
    """The guest's log tail (its serial console, for a VM), kept when it did not become ready."""
    setup_steps: list[SetupStepRecord] = []
    evaluator: EvalResult | None = None
    """Present once the evaluator returned a score ("evaluated"), even when the canary failed on a getter."""
    failure_classification: str | None = None
    error: str | None = None
    duration_sec: float = 0.0


class CanaryOptions(OSWorldSettings, AssetSettings, GuestSettings, TaskSettings):
    task_id: str = Field(pattern=SAFE_NAME)
    """The OSWorld task id."""
    result_dir: Path
    """Where report.json (and the guest's work files) go."""
    run_evaluator: bool = False
    """Also score the untouched setup state with the official evaluator (usually 0)."""
    boot_timeout: float = Field(default=GUEST.boot_timeout_sec, gt=0)
    step_deadline: float = Field(default=300.0, gt=0)
    """Deadline of each setup step, in seconds."""
    app_deadline: float = Field(default=APP_START_SEC, gt=0)
    """Seconds an application may take to show up after the step that starts it."""
    run_id: str | None = Field(default=None, pattern=SAFE_NAME)
    """Label the guest with this run id (default: a fresh canary-<random> id); `cleanup --run-id` finds it."""


def parse_args(argv: list[str] | None) -> CanaryOptions:
    parser = OneLineParser(prog="python -m hcu.osworld.setup_canary", description=__doc__)
    add_flags(parser, CanaryOptions)
    args = parse_flags(CanaryOptions, argv, parser)
    check_paths(parser, args, "--result-dir", args.result_dir)
    return args.model_copy(update=guest_defaults(args, args.benchmark_version))


def check_paths(parser: OneLineParser, args: Any, folder_flag: str, folder: Path) -> Path | None:
    """The paths the canary's and the sweep's flags name, checked (a bad one: one line, exit 2); the stand-in
    cache when stand-ins are asked for."""
    if args.guest_image is not None and not args.guest_image.is_file():
        parser.error(f"--guest-image: {args.guest_image} is not a file")
    if args.tasks_dir is not None and not args.tasks_dir.is_dir():
        parser.error(f"--tasks-dir: {args.tasks_dir} is not a folder")
    if folder.exists() and not folder.is_dir():
        parser.error(f"{folder_flag}: {folder} exists and is not a folder")
    if not args.asset_stand_ins:
        return None
    try:
        return stand_in_cache(args.asset_cache)
    except AssetError as exc:
        parser.error(str(exc))


def guest_defaults(args: GuestSettings, benchmark_version: str) -> dict[str, Any]:
    """The guest settings with the benchmark version's defaults filled (the canary's and the sweep's)."""
    version = BENCHMARKS[benchmark_version]
    return {
        "guest_image": args.guest_image.resolve() if args.guest_image else None,
        "test_desktop": args.test_desktop_image,
        "volume_size": args.volume_size or version.volume_size,
        "client_password": version.client_password if args.client_password is None else args.client_password,
    }


def _raise_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through `finally`, so the guest is removed


def run(args: CanaryOptions, task: TaskDefinition, osworld_process_to_reuse: OSWorldProcess | None = None
        ) -> CanaryReport:
    """One canary, report.json written whatever happens; the guest is always removed. A sweep passes its
    worker's running OSWorld process, opened on this canary's guest instead of starting one."""
    from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest

    spec = GuestSpec.for_settings(args)
    report = CanaryReport(
        status="failed", benchmark_version=args.benchmark_version, task_id=task.id,
        task_domain=task.domain, task_sha256=task.sha256, guest_kind=spec.kind, guest_image=spec.image,
        volume_size_gb=spec.volume_size_gb,
    )
    attempt = AttemptId(run_id=args.run_id or f"canary-{uuid.uuid4().hex[:12]}", task_id=task.id, attempt=1)
    started = time.monotonic()
    guest = None
    try:
        assets = AssetCache.configured(args.asset_cache, offline=args.offline_assets, mirror=args.asset_mirror,
                                       stand_ins=args.asset_stand_ins)
        report.stand_ins = assets.stand_ins
        work_dir = args.result_dir / "work"
        guest = start_guest(spec, attempt, work_dir=work_dir, boot_timeout_sec=args.boot_timeout)
        report.readiness = list(guest.readiness)
        cache_dir = task_cache_dir(args.result_dir / ".osworld-cache", task)
        password = spec.client_password
        with osworld_process(guest, cache_dir, osworld_python=args.osworld_python, offline_assets=assets.offline,
                             what=f"canary {task.id}", reuse=osworld_process_to_reuse) as osworld:
            hello = osworld.hello
            report.desktop_env, report.osworld_python, report.hcu = hello["desktop_env"], hello["python"], hello["hcu"]
            ensure_evaluator_loads(osworld, task)
            if assets.stand_ins:
                stand_ins.provide(osworld, task, assets)
            report.setup_steps = run_setup(osworld, task, password=password, cache_dir=cache_dir, assets=assets,
                                           step_deadline_sec=args.step_deadline,
                                           check=AppCheck(guest, args.app_deadline))
            if args.run_evaluator:
                report.evaluator = evaluate(osworld, task, agent_last_action=None, password=password,
                                            cache_dir=cache_dir, assets=assets)
        if report.evaluator is not None and report.evaluator.getters_read_nothing:
            empty = "; ".join(f"{g.getter}: {g.reason}" for g in report.evaluator.getters_read_nothing)
            raise EvaluatorError(f"the evaluator could not read the state: {empty}")
        report.status = "passed"
    except PhaseError as exc:
        report.readiness = report.readiness or list(getattr(exc, "readiness", []))
        report.console_log = getattr(exc, "console_log", None)
        if isinstance(exc, SetupStepError):
            report.setup_steps = exc.records
        report.failure_classification, report.error = exc.classification, str(exc)
    except Exception as exc:  # noqa: BLE001 - a canary reports every failure instead of a traceback
        report.failure_classification, report.error = "runner", f"{type(exc).__name__}: {exc}"
    except (KeyboardInterrupt, SystemExit) as exc:
        report.failure_classification, report.error = "interrupted", f"stopped by {type(exc).__name__}"
        raise
    finally:
        if guest is not None:
            remove_guest(guest)
        report.duration_sec = round(time.monotonic() - started, 3)
        write_record(args.result_dir / REPORT_NAME, report)
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        task = load_task(args.benchmark_version, args.task_id, args.task_domain, args.tasks_dir, args.osworld_python)
    except (TaskError, PhaseError) as exc:
        print(f"setup_canary: error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    with contextlib.redirect_stdout(sys.stderr):  # OSWorld's getters print; stdout keeps the one result line
        report = run(args, task)
    line = f"setup_canary: {report.status}: {args.result_dir / REPORT_NAME}"
    if report.error:
        line += f" ({report.error})"
    print(line, file=sys.stderr if report.status == "failed" else sys.stdout)
    return 0 if report.status == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
