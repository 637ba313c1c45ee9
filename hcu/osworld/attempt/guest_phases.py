"""The phases every attempt runs, with an agent or without (the canary): load the task, boot the guest, run the
task's setup, score the guest's state, remove the guest; and the state they carry.

This is the one module of hcu that starts a guest. The attempt holds one OSWorld process, shared by setup and
evaluation: it starts at load and loads OSWorld's evaluators (checking the task's metrics and getters) while
the guest boots, and is opened on the guest for setup; a deadline kills it and everything it started (the next
call starts a fresh one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from hcu.osworld.attempt.app_check import AppCheck
from hcu.osworld.attempt.background import in_background
from hcu.osworld.attempt.failures import Failure
from hcu.osworld.attempt.meta import AttemptMeta, GuestRecord, OSWorldRecord
from hcu.osworld.attempt.runner import PhaseLog
from hcu.osworld.guest.kinds import SavedDesktop
from hcu.osworld.guest.lifecycle import BootRecord, Guest, GuestSpec, remove_guest, start_guest
from hcu.osworld.guest_state import start as guest_start
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.evaluate import EvalResult, ensure_evaluator_loads, evaluate
from hcu.osworld.osworld_bridge.process import OSWorldProcess, resolve_python
from hcu.osworld.osworld_bridge.setup import SetupStepError, open_on_guest, run_setup, task_cache_dir
from hcu.osworld.osworld_bridge.tasks import TaskDefinition, load_task
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.settings import GuestAttemptSettings
from hcu.record_io import write_atomic

log = logging.getLogger("hcu.run_task")


SettingsT = TypeVar("SettingsT", bound=GuestAttemptSettings, covariant=True)
AssetSource = Callable[[GuestAttemptSettings], AssetCache]
"""Where an attempt's task files come from, given its resolved settings: the command that starts the attempt
chooses among the sources; the phases read files through the one it returns and never know which it is."""


@dataclass
class AttemptState(Generic[SettingsT]):
    """What an attempt carries through its phases; `SettingsT` is what its phases read of its settings (these
    phases read `GuestAttemptSettings`; an attempt with an agent reads `AttemptSettings`, a canary its options)."""

    settings: SettingsT
    """The attempt's settings (resolved by its load phase where they are not already)."""
    attempt: AttemptId
    result_dir: Path
    phases: PhaseLog
    boot_timeout_sec: float
    """The boot's own bound (0: the boot phase's deadline alone ends it)."""
    asset_source: AssetSource
    """Asked by the load phase for the attempt's source of task files (`assets`)."""
    task: TaskDefinition | None = None
    assets: AssetCache | None = None
    guest: Guest | None = None
    osworld: OSWorldProcess | None = None
    reused_osworld: bool = False
    """The OSWorld process belongs to the caller (a sweep worker's): opened on this guest, left running."""
    evaluation: EvalResult | None = None
    failure: Failure | None = None
    """What ended the attempt, for the closing phases (the runner sets it before they run)."""
    warming: Future[None] | None = None
    """OSWorld's code loading in the OSWorld process while the guest boots (and the task's evaluator checked)."""
    save_dir: Path | None = None
    """Where the guest's final desktop may be saved (None: it is not kept)."""
    saved_desktop: SavedDesktop | str | None = None
    """The final desktop as saved before the evaluator read the guest, or why it was not."""
    meta: AttemptMeta = field(init=False)

    def __post_init__(self) -> None:
        self.meta = AttemptMeta(attempt_id=str(self.attempt))

    @property
    def guest_dir(self) -> Path:
        """The guest's work files (its overlay, its console when it did not come up)."""
        return self.result_dir / ".guest"

    @property
    def cache_dir(self) -> Path:
        assert self.task is not None
        return task_cache_dir(self.result_dir / ".osworld-cache", self.task)


def load(state: AttemptState[GuestAttemptSettings]) -> None:
    """The task definition, the asset source and the OSWorld interpreter: what no guest is started without."""
    s = state.settings
    state.task = load_task(s.benchmark_version, state.attempt.task_id, s.task_domain, s.tasks_dir, s.osworld_python)
    state.meta.task_sha256 = state.task.sha256
    state.assets = state.asset_source(s)
    python = resolve_python(s.osworld_python)
    state.meta.osworld = OSWorldRecord(python=str(python))
    if state.osworld is None:
        state.osworld = OSWorldProcess(python, work_dir=state.result_dir / ".osworld-process",
                                       secret=s.client_password or "", what=f"{state.attempt} osworld")
    process, task = state.osworld, state.task
    state.warming = in_background(lambda: ensure_evaluator_loads(process, task), f"{state.attempt} warming")


def boot(state: AttemptState[GuestAttemptSettings]) -> None:
    """The guest, restored from this host's snapshot of its configuration or booted (guest_start), ready."""
    s = state.settings
    spec = GuestSpec.for_settings(s)
    state.meta.guest = GuestRecord(spec=spec.model_dump(mode="json", exclude={"client_password"}))
    boot = BootRecord()
    try:
        state.guest, start = guest_start.start(
            spec, state.attempt, asked=s.guest_start, cache_dir=s.snapshot_cache, work_dir=state.guest_dir,
            boot_timeout_sec=state.boot_timeout_sec, boot=boot, save_dir=state.save_dir,
            progress_file=state.result_dir / "progress.json")  # where a memory wait shows
    except BaseException:  # where the boot stopped
        state.meta.guest.readiness, state.meta.guest.console_log = list(boot.readiness), boot.console_log
        raise
    g = state.guest
    state.meta.guest = GuestRecord(spec=state.meta.guest.spec, container_id=g.container_id, host=g.host,
                                   ports=g.ports, container_image=g.container_image, readiness=list(g.readiness),
                                   start=start)


def restore(state: AttemptState[GuestAttemptSettings], saved: SavedDesktop) -> None:
    """The guest started from a saved desktop instead of booting (a kept final desktop regraded or opened)."""
    spec = GuestSpec.for_settings(state.settings)
    state.meta.guest = GuestRecord(spec=spec.model_dump(mode="json", exclude={"client_password"}))
    boot = BootRecord()
    try:
        state.guest = start_guest(spec, state.attempt, work_dir=state.guest_dir, boot=boot, restore=saved,
                                  boot_timeout_sec=state.boot_timeout_sec,
                                  progress_file=state.result_dir / "progress.json")
    finally:
        state.meta.guest.readiness, state.meta.guest.console_log = list(boot.readiness), boot.console_log


def open_osworld(state: AttemptState[GuestAttemptSettings]) -> None:
    """OSWorld's process opened on the guest once its evaluator checked (a task that can never be scored spends
    nothing more)."""
    assert state.osworld is not None and state.guest is not None and state.assets is not None
    assert state.warming is not None
    state.warming.result()
    hello = open_on_guest(state.osworld, state.guest, state.cache_dir, offline_assets=state.assets.offline)
    state.meta.osworld = OSWorldRecord(python=hello["python"], desktop_env=hello["desktop_env"], hcu=hello["hcu"])


def setup(state: AttemptState[GuestAttemptSettings]) -> None:
    """OSWorld's process opened on the guest, then the task's setup, strict, each step under its deadline and
    followed by the application check."""
    s, task, osworld = state.settings, state.task, state.osworld
    assert task is not None and osworld is not None and state.guest is not None and state.assets is not None
    open_osworld(state)
    try:
        state.meta.setup_steps = run_setup(
            osworld, task, password=state.guest.spec.client_password, cache_dir=state.cache_dir,
            assets=state.assets, step_deadline_sec=s.setup_step_timeout_seconds,
            window_deadline_sec=s.app_start_timeout_seconds, check=AppCheck(state.guest, s.app_start_timeout_seconds))
    except SetupStepError as exc:
        state.meta.setup_steps = exc.records
        raise


def score(state: AttemptState[GuestAttemptSettings], *, last_action: str | None, deadline_sec: float) -> EvalResult:
    """OSWorld's evaluator on the guest's state now, between two screenshots kept as evidence."""
    assert state.task is not None and state.osworld is not None and state.guest is not None
    assert state.assets is not None
    _screenshot(state, "final-before-eval.png")
    try:
        state.evaluation = evaluate(state.osworld, state.task, agent_last_action=last_action,
                                    password=state.guest.spec.client_password, cache_dir=state.cache_dir,
                                    assets=state.assets, deadline_sec=deadline_sec,
                                    step_deadline_sec=state.settings.setup_step_timeout_seconds)
    finally:
        _screenshot(state, "final-after-eval.png")
    return state.evaluation


def cleanup(state: AttemptState[GuestAttemptSettings]) -> None:
    """The guest and everything it made, then the OSWorld process: ended for good, or, the caller's, left idle
    (its warm-up finished: the caller's next attempt uses it)."""
    try:
        if state.guest is not None:
            remove_guest(state.guest)
    finally:
        if state.osworld is not None and not state.reused_osworld:
            state.osworld.shutdown()
        elif state.warming is not None:
            wait(state.warming)


def _screenshot(state: AttemptState[GuestAttemptSettings], name: str) -> None:
    assert state.guest is not None
    try:
        write_atomic(state.result_dir / name, state.guest.api.screenshot())
    except Exception as exc:  # evidence is best effort: the score does not depend on it
        log.warning("screenshot %s failed: %s", name, exc)
