"""Task setup with OSWorld's own `SetupController`, one step at a time, each under a deadline.

Downloads go through the asset cache: before a `download` step runs, every file it names is resolved through
the cache and linked to where OSWorld's own download hook looks first
(`<task cache>/<uuid5(url)>_<basename(path)>`), so OSWorld uploads it without touching the network.
Placeholders such as `{CLIENT_PASSWORD}` are filled by OSWorld's code; records keep the task's own
parameters, and the password is masked wherever text leaves this module (records, errors, OSWorld's logs).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import orjson

from hcu.osworld.errors import SetupError
from hcu.osworld.osworld_bridge import code as osworld_code
from hcu.osworld.osworld_bridge.assets import AssetCache, AssetError
from hcu.osworld.tasks import TaskDefinition
from hcu.record_io import Record

SCREEN_WIDTH, SCREEN_HEIGHT = 1920, 1080
"""OSWorld's guest screen; it only feeds the `{SCREEN_*}` placeholders."""
OSWORLD_LOGGERS = ("desktopenv.setup", "desktopenv.pycontroller", "desktopenv.getters")
MASK = "***"


class _Ports(Protocol):
    api: int
    cdp: int
    vlc: int


class _Spec(Protocol):
    client_password: str


class GuestLike(Protocol):
    """What setup and evaluation need of `hcu.osworld.guest.lifecycle.Guest`."""

    host: str
    ports: _Ports
    spec: _Spec


class SetupStepRecord(Record):
    index: int
    type: str
    parameters: dict[str, Any]
    """As written in the task (placeholders unfilled), with the client password masked."""
    duration_sec: float
    ok: bool
    error: str | None = None


class SetupStepError(SetupError):
    """A setup step failed; `records` holds every step run so far, the failed one last."""

    def __init__(self, message: str, records: list[SetupStepRecord]) -> None:
        super().__init__(message)
        self.records = records


def mask(text: str, password: str) -> str:
    """`text` with the client password masked (a no-op for an empty password)."""
    return text.replace(password, MASK) if password else text


def mask_values(value: Any, password: str) -> Any:
    """A copy of a JSON value with the password masked in every string."""
    if isinstance(value, str):
        return mask(value, password)
    if isinstance(value, list):
        return [mask_values(v, password) for v in value]
    if isinstance(value, dict):
        return {k: mask_values(v, password) for k, v in value.items()}
    return value


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class _MaskPassword(logging.Filter):
    def __init__(self, password: str) -> None:
        super().__init__()
        self.password = password

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.password and self.password in message:
            record.msg, record.args = mask(message, self.password), None
        return True


def mask_osworld_logs(password: str) -> None:
    """OSWorld logs setup commands after filling `{CLIENT_PASSWORD}`: mask it on its loggers."""
    for name in OSWORLD_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _MaskPassword) and f.password == password for f in logger.filters):
            logger.addFilter(_MaskPassword(password))


def task_cache_dir(osworld_cache_dir: Path, task: TaskDefinition) -> Path:
    """OSWorld's per-task cache (`cache_dir/<task id>`, as `DesktopEnv` makes it); keep it until evaluation,
    since `cache_file` getters read what setup wrote there."""
    path = Path(osworld_cache_dir) / task.id
    path.mkdir(parents=True, exist_ok=True)
    return path


def setup_controller(guest: GuestLike, cache_dir: Path) -> Any:
    """OSWorld's `SetupController` pointed at our guest's published ports."""
    module = osworld_code.module("controllers.setup")
    mask_osworld_logs(guest.spec.client_password)
    return module.SetupController(
        vm_ip=guest.host,
        server_port=guest.ports.api,
        chromium_port=guest.ports.cdp,
        vlc_port=guest.ports.vlc,
        cache_dir=str(cache_dir),
        client_password=guest.spec.client_password,
        screen_width=SCREEN_WIDTH,
        screen_height=SCREEN_HEIGHT,
    )


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


def prefill_downloads(step: dict[str, Any], cache_dir: Path, assets: AssetCache) -> None:
    """Resolve every file of a `download` step through the asset cache ahead of OSWorld's own hook."""
    for entry in step.get("parameters", {}).get("files", []):
        url, guest_path = entry.get("url"), entry.get("path")
        if url and guest_path:
            place(assets.resolve(url), osworld_download_target(cache_dir, url, guest_path))


def _run_one(controller: Any, step: dict[str, Any], cache_dir: Path, assets: AssetCache) -> bool:
    """One step through OSWorld's `setup()`; a download's files come from the asset cache first (inside the
    step's deadline, since a cache miss downloads)."""
    if step.get("type") == "download":
        prefill_downloads(step, cache_dir, assets)
    return controller.setup([step], use_proxy=False)


def run_steps(
    controller: Any,
    steps: list[dict[str, Any]],
    *,
    password: str,
    cache_dir: Path,
    assets: AssetCache,
    step_deadline_sec: float,
    what: str = "setup step",
    offline_host: str | None = None,
) -> list[SetupStepRecord]:
    """Run `steps` through `controller.setup([step])` in order; stop at the first failure with a
    `SetupStepError` naming the step's index, type and parameters. With `offline_host`, OSWorld's code may
    reach only that host (the guest)."""
    records: list[SetupStepRecord] = []
    for index, step in enumerate(steps):
        step_type = str(step.get("type"))
        parameters = mask_values(step.get("parameters", {}), password)
        started = time.monotonic()
        error: str | None = None
        try:
            with osworld_code.offline(offline_host):
                ran = osworld_code.call_with_deadline(
                    functools.partial(_run_one, controller, step, cache_dir, assets),
                    step_deadline_sec,
                    f"{what} {index} ({step_type})",
                )
            if ran is False:
                error = "the guest API did not answer GET /terminal"
        except AssetError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - OSWorld raises bare Exception; recorded, then raised
            error = one_line(mask(f"{type(exc).__name__}: {exc}", password))
        records.append(
            SetupStepRecord(
                index=index,
                type=step_type,
                parameters=parameters,
                duration_sec=round(time.monotonic() - started, 3),
                ok=error is None,
                error=error,
            )
        )
        if error is not None:
            shown = orjson.dumps(parameters).decode()
            message = f"{what} {index} ({step_type}) failed: {error}; parameters: {shown}"
            raise SetupStepError(message, records)
    return records


def run_setup(
    guest: GuestLike,
    task: TaskDefinition,
    *,
    osworld_cache_dir: Path,
    asset_cache: Path | None,
    offline_assets: bool,
    step_deadline_sec: float = 300,
    asset_mirror: str | None = None,
) -> list[SetupStepRecord]:
    """Run the task's `config` steps in the guest. Raises `SetupStepError` (a `SetupError`) on the first
    failed step; `osworld_cache_dir` should be per attempt (it holds what evaluation reads back)."""
    cache_dir = task_cache_dir(osworld_cache_dir, task)
    return run_steps(
        setup_controller(guest, cache_dir),
        task.config,
        password=guest.spec.client_password,
        cache_dir=cache_dir,
        assets=AssetCache.configured(asset_cache, offline=offline_assets, mirror=asset_mirror),
        step_deadline_sec=step_deadline_sec,
        offline_host=guest.host if offline_assets else None,
    )
