"""What a queue checks before it touches a run directory: that it is the only queue on it (the run lock), and that
a resume runs the same run (the stored config, less the keys a resume may change)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from filelock import FileLock, Timeout
from pydantic import ValidationError

from hcu.osworld.queue.control import LOCK_FILE
from hcu.osworld.queue.executor import QueueRefused
from hcu.osworld.run_config import RunConfig

RUN_LOCK_WAIT_SEC = 2.0
"""How long a starting queue waits for the run lock: `ctl` takes it for an instant to learn whether a queue runs."""


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """One queue per run directory. The OS drops the lock when its holder dies, even by kill -9."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_dir / LOCK_FILE), timeout=RUN_LOCK_WAIT_SEC)
    try:
        lock.acquire()
    except Timeout:
        raise QueueRefused(f"{run_dir}: another queue is already running on this run directory") from None
    try:
        yield
    finally:
        lock.release()


def stored_config(config: RunConfig) -> RunConfig | None:
    """The config the run started with (None for a new run); QueueRefused when it cannot be read."""
    path = config.run_dir / "config.json"
    if not path.exists():
        return None
    try:
        return RunConfig.model_validate(orjson.loads(path.read_bytes()))
    except (orjson.JSONDecodeError, ValidationError):
        raise QueueRefused(f"{path}: unreadable; this run's config cannot be compared") from None


def lowered_repeats(stored: RunConfig, config: RunConfig) -> str | None:
    """Which key lowers a task's repeats below those the run started with (None: none does)."""
    before = {task.id: stored.repeats_of(task) for task in stored.tasks}
    for index, task in enumerate(config.tasks):
        old, new = before.get(task.id), config.repeats_of(task)
        if old is not None and new < old:
            key = f"tasks[{index}].repeats" if task.repeats is not None else "repeats"
            return (f"{key}: task {task.id} would have {new} repeats, the run has {old}; repeats can be raised "
                    "on resume, never lowered")
    return None


def config_difference(config: RunConfig) -> list[str] | None:
    """Keys that differ from the config stored in the run directory; None when there is none yet."""
    try:
        stored = stored_config(config)
    except QueueRefused:
        return ["config.json (unreadable)"]
    if stored is None:
        return None
    old, new = stored.comparable(), config.comparable()
    changed = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
    return changed + (["repeats (lowered)"] if lowered_repeats(stored, config) else [])


def refuse_changed_config(config: RunConfig) -> None:
    """Refuse a resume whose config is another run's (nothing in the run directory is touched)."""
    stored = stored_config(config)
    lowered = lowered_repeats(stored, config) if stored is not None else None
    if lowered:
        raise QueueRefused(f"{config.run_dir / 'config.json'}: {lowered}")
    changed = config_difference(config)
    if changed:
        raise QueueRefused(f"{config.run_dir / 'config.json'}: {', '.join(changed)} differ from the config "
                           "this run started with (only max_active_tasks, launch_stagger_seconds, "
                           "expected_durations_from, max_cost_usd, forecast_from, quota, ray.address and raised "
                           "repeats may change; use a new run_id)")
