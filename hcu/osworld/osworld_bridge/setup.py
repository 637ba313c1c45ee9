"""Task setup with OSWorld's own `SetupController`, in the OSWorld process, one step at a time, each under a
deadline that kills the process when it passes.

Downloads go through hcu's asset cache, here in hcu's process: before a step runs, every file OSWorld would
fetch for it is resolved through the cache and linked to where OSWorld's own code looks first
(`<task cache>/<uuid5(url)>_<basename(path)>` for `download`, `history_new.sqlite` for
`update_browse_history`), so OSWorld uploads it without touching the network. With offline assets the OSWorld
process cannot fetch anything but the guest (see child/offline.py). Records keep the task's own parameters
(placeholders unfilled) with the password masked; OSWorld's log lines are masked as they leave the process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import BaseModel

from hcu.defaults import SETUP
from hcu.osworld.errors import ConfigurationError, HcuOSWorldError, PhaseError
from hcu.osworld.osworld_bridge.assets import AssetCache, AssetError
from hcu.osworld.osworld_bridge.process import OSWorldCodeError, OSWorldProcess
from hcu.osworld.osworld_bridge.protocol import mask, one_line
from hcu.osworld.osworld_bridge.tasks import TaskDefinition
from hcu.record_io import Record

BROWSE_HISTORY_URL = ("https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/"
                      "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true")
"""The database OSWorld's `update_browse_history` step fetches into `<task cache>/history_new.sqlite`."""


class _Ports(Protocol):
    api: int
    cdp: int
    vnc: int
    vlc: int


class _Spec(Protocol):
    client_password: str


class GuestLike(Protocol):
    """What setup and evaluation need of `hcu.osworld.guest.lifecycle.Guest`."""

    host: str
    ports: _Ports
    spec: _Spec


class GuestAnswer(BaseModel):
    """One request OSWorld's code sent the guest during a step, and what the guest answered."""

    method: str
    path: str
    status: int | None
    """HTTP status; None when no answer came back."""
    ok: bool
    message: str | None = None
    """The guest's message for an answer that is not a success (the client password masked)."""
    returncode: int | None = None
    """An `/execute` answer's exit status: recorded, not judged (task commands such as `pkill` may exit 1)."""
    file: str | None = None


class SetupStepRecord(Record):
    index: int
    type: str
    parameters: dict[str, Any]
    """As written in the task (placeholders unfilled), with the client password masked."""
    duration_sec: float
    ok: bool
    error: str | None = None
    guest_answers: list[GuestAnswer] = []
    """Every request the step sent the guest (OSWorld's reachability probe left out)."""
    checks: list[str] = []
    """What was checked after the step beyond the guest's answers (the canary: the application is there)."""


StepCheck = Callable[[dict[str, Any]], list[str]]
"""Called after a step succeeded: returns what it verified, raises SetupError when the step's effect is missing."""


class SetupStepError(HcuOSWorldError):
    """A setup (or postconfig) step failed; `records` holds every step run so far, the failed one last, and
    `cause` what failed it. Its class is the cause's, else that of the phase it ends (the runner decides)."""

    def __init__(self, message: str, records: list[SetupStepRecord], cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.records, self.cause = records, cause


class MissingApplication(ConfigurationError):
    """A `launch` step's program is not installed in the guest (VS Code on the test desktop): every attempt
    fails the same way, so it is never retried and never scored."""


APPLICATIONS = {"code": "VS Code", "google-chrome": "Google Chrome", "gimp": "GIMP", "vlc": "VLC",
                "libreoffice": "LibreOffice", "soffice": "LibreOffice", "thunderbird": "Thunderbird"}
"""Programs the tasks launch, by the application they name (for the one-line error)."""


def missing_program(step: dict[str, Any], error: str) -> str | None:
    """The program of a `launch` step when the guest answered that it does not exist (of an `execute` or
    `command` step too when the program is one of APPLICATIONS: a task's own scripts and tools stay `setup`
    failures), else None."""
    if step.get("type") not in ("launch", "execute", "command"):
        return None
    command = (step.get("parameters") or {}).get("command") or []
    try:
        words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
    except ValueError:
        return None
    if not words:
        return None
    if step.get("type") != "launch" and Path(words[0]).name not in APPLICATIONS:
        return None
    return words[0] if f"No such file or directory: '{words[0]}'" in error else None


def mask_values(value: Any, password: str) -> Any:
    """A copy of a JSON value with the password masked in every string."""
    if isinstance(value, str):
        return mask(value, password)
    if isinstance(value, list):
        return [mask_values(v, password) for v in value]
    if isinstance(value, dict):
        return {k: mask_values(v, password) for k, v in value.items()}
    return value


def task_cache_dir(osworld_cache_dir: Path, task: TaskDefinition) -> Path:
    """OSWorld's per-task cache (`cache_dir/<task id>`, as `DesktopEnv` makes it); keep it until evaluation,
    since `cache_file` getters read what setup wrote there."""
    path = Path(osworld_cache_dir) / task.id
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def open_on_guest(process: OSWorldProcess, guest: GuestLike, cache_dir: Path, *,
                  offline_assets: bool) -> dict[str, Any]:
    """Point the OSWorld process at `guest` and the task's cache (starting it when none runs, so its import time
    is not charged to a step); returns who it is (`hello`)."""
    password = guest.spec.client_password
    process.open(
        guest={"host": guest.host, "api": guest.ports.api, "cdp": guest.ports.cdp, "vnc": guest.ports.vnc,
               "vlc": guest.ports.vlc},
        cache_dir=str(cache_dir), client_password=password, offline=offline_assets,
    )
    return process.hello


def osworld_download_target(cache_dir: Path, url: str, guest_path: str) -> Path:
    """Where OSWorld's `_download_setup` looks for a file before downloading it."""
    return Path(cache_dir) / f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{os.path.basename(guest_path)}"


def place(source: Path, target: Path) -> None:
    """Put a cached file where OSWorld reads it: a hard link if possible, else a copy."""
    if target.exists():
        return
    if not source.is_file():
        raise AssetError(f"asset {source} does not exist")
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def prefill(step: dict[str, Any], cache_dir: Path, assets: AssetCache) -> None:
    """Resolve every file a step makes OSWorld fetch through the asset cache, ahead of OSWorld's own hook."""
    parameters = step.get("parameters") or {}
    if step.get("type") == "download":
        for entry in parameters.get("files", []):
            url, guest_path = entry.get("url"), entry.get("path")
            if url and guest_path:
                place(assets.resolve(url), osworld_download_target(cache_dir, url, guest_path))
    elif step.get("type") == "update_browse_history":
        place(assets.resolve(BROWSE_HISTORY_URL), cache_dir / "history_new.sqlite")


def run_steps(
    process: OSWorldProcess,
    steps: list[dict[str, Any]],
    *,
    password: str,
    cache_dir: Path,
    assets: AssetCache,
    step_deadline_sec: float,
    window_deadline_sec: float | None = None,
    what: str = "setup step",
    check: StepCheck | None = None,
) -> list[SetupStepRecord]:
    """Run `steps` in order, each as its own call under `step_deadline_sec` (an `open` step under
    `window_deadline_sec` when it is shorter: the guest waits up to 30 minutes for a window naming the file),
    then `check`, when given; stop at the first failure with a `SetupStepError` naming the step's index, type
    and parameters. A guest answer that is not a success fails the step (the OSWorld process sees every
    answer, including those OSWorld's controller only logs)."""
    records: list[SetupStepRecord] = []
    for index, step in enumerate(steps):
        step_type = str(step.get("type"))
        parameters = mask_values(step.get("parameters", {}), password)
        started = time.monotonic()
        error: str | None = None
        answers: list[Any] = []
        checked: list[str] = []
        cause: BaseException | None = None
        label = f"{what} {index} ({step_type})"
        deadline = step_deadline_sec
        if step_type == "open" and window_deadline_sec and (not deadline or window_deadline_sec < deadline):
            deadline = window_deadline_sec
        try:
            prefill(step, cache_dir, assets)
            answered = process.call("setup_step", {"step": step}, deadline_sec=deadline, what=label)
            answers = answered.get("answers", [])
            if check is not None:
                checked = check(step)
        except (AssetError, PhaseError) as exc:
            error, cause = one_line(mask(str(exc), password)), exc
        except OSWorldCodeError as exc:
            error, cause = one_line(mask(_step_error(step, exc, deadline), password)), exc
            if program := missing_program(step, error):
                name = APPLICATIONS.get(Path(program).name, program)
                error = f"missing application: {name} (`{program}`) is not installed in the guest; {error}"
                cause = MissingApplication(error)
        records.append(SetupStepRecord(index=index, type=step_type, parameters=parameters, ok=error is None,
                                       duration_sec=round(time.monotonic() - started, 3), error=error,
                                       guest_answers=answers, checks=checked))
        if error is not None:
            shown = orjson.dumps(parameters).decode()
            raise SetupStepError(f"{label} failed: {error}; parameters: {shown}", records, cause)
    return records


def _step_error(step: dict[str, Any], exc: OSWorldCodeError, deadline_sec: float) -> str:
    """What failed a step in OSWorld's process; an `open` that ran out of time names its file."""
    if exc.kind == "deadline" and step.get("type") == "open":
        path = (step.get("parameters") or {}).get("path")
        return f"no window of {path} appeared within {deadline_sec:g} s (the guest's open_file still waits)"
    return exc.detail


def run_setup(
    process: OSWorldProcess,
    task: TaskDefinition,
    *,
    password: str,
    cache_dir: Path,
    assets: AssetCache,
    step_deadline_sec: float = SETUP.step_timeout_sec,
    window_deadline_sec: float | None = None,
    check: StepCheck | None = None,
) -> list[SetupStepRecord]:
    """The task's setup in the guest: the asset source prepared for the task, then a V1 task's `config` steps
    one by one (each followed by `check`), or a V2 class's own `setup()` as one step. Raises `SetupStepError` on
    the first failure."""
    assets.prepare(task)
    if task.kind == "v2_class":
        return _run_v2_setup(process, task, password=password, cache_dir=cache_dir, assets=assets,
                             deadline_sec=step_deadline_sec)
    return run_steps(process, task.config, password=password, cache_dir=cache_dir, assets=assets,
                     step_deadline_sec=step_deadline_sec, window_deadline_sec=window_deadline_sec, check=check)


def _run_v2_setup(process: OSWorldProcess, task: TaskDefinition, *, password: str, cache_dir: Path,
                  assets: AssetCache, deadline_sec: float) -> list[SetupStepRecord]:
    started, error, cause = time.monotonic(), None, None
    label = "setup step 0 (task_class.setup)"
    try:
        for step in task.config:  # a class that keeps V1-style steps may download through them
            prefill(step, cache_dir, assets)
        process.call("v2_setup", task.v2_ref(), deadline_sec=deadline_sec, what=label)
    except AssetError as exc:
        error, cause = str(exc), exc
    except OSWorldCodeError as exc:
        error, cause = one_line(mask(exc.detail, password)), exc
    record = SetupStepRecord(index=0, type="task_class.setup", parameters={}, ok=error is None,
                             duration_sec=round(time.monotonic() - started, 3), error=error)
    if error is not None:
        raise SetupStepError(f"{label} failed: {error}", [record], cause)
    return [record]
