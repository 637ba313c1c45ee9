"""One kept final desktop scored again: the attempt runner with this phase list: load (the task file as it is now,
OSWorld's process, the base image checked against the kept desktop's), boot (a fresh guest restored from the kept
desktop), open OSWorld on it, evaluate (with the last action the agent's attempt gave the evaluator), then
cleanup whatever happened. No agent, no gateway, no model call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from hcu.osworld.attempt import guest_phases as guest
from hcu.osworld.attempt.failures import Failure
from hcu.osworld.attempt.guest_phases import AttemptState
from hcu.osworld.attempt.runner import Phase, PhaseLog, run_phases
from hcu.osworld.errors import BootTimeout, ConfigurationError, EvaluationTimeout, counted_score
from hcu.osworld.guest_state.kept import KeptDesktop, evaluator_sha256
from hcu.osworld.guest_state.snapshots import image_sha256
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.regrade import Regrade
from hcu.osworld.settings import GuestAttemptSettings, TimeoutSettings
from hcu.record_io import write_record


class RegradeSettings(TimeoutSettings, GuestAttemptSettings):
    """What a regrade reads of the run's settings for one task."""

    @classmethod
    def of(cls, settings: GuestAttemptSettings) -> RegradeSettings:
        return cls.model_validate({name: getattr(settings, name) for name in cls.model_fields})


@dataclass
class RegradeState(AttemptState["RegradeSettings"]):
    """A regrade: the guest's phases, with the kept desktop they start from."""

    kept: KeptDesktop | None = None

    @property
    def desktop(self) -> KeptDesktop:
        assert self.kept is not None
        return self.kept


def _timeout(state: AttemptState) -> float:
    return state.settings.timeout_seconds


def _load(state: RegradeState) -> None:
    guest.load(state)
    kept = state.desktop
    if kept.base_image is not None and kept.base_sha256 is not None:
        base = Path(kept.base_image)
        if not base.is_file() or image_sha256(base) != kept.base_sha256:
            raise ConfigurationError(f"guest image {base}: not the one the desktop was kept on (sha256 "
                                     f"{kept.base_sha256[:12]}...)")


def _restore(state: RegradeState) -> None:
    guest.restore(state, state.desktop.saved)


def _evaluate(state: RegradeState) -> None:
    guest.score(state, last_action=state.desktop.last_action, deadline_sec=state.settings.timeout_seconds)


PHASES: list[Phase[RegradeState]] = [
    Phase("load", _load, failure="configuration"),
    Phase("boot", _restore, failure="guest", overrun=BootTimeout, deadline_sec=_timeout),
    Phase("open osworld", guest.open_osworld, failure="evaluator"),
    Phase("evaluate", _evaluate, failure="evaluator", overrun=EvaluationTimeout, deadline_sec=_timeout),
]
CLOSING: list[Phase[RegradeState]] = [Phase("cleanup", guest.cleanup)]


def run_assets(settings: GuestAttemptSettings) -> AssetCache:
    """A scored run's task files: its asset cache, as its attempts had it (a run never uses stand-ins)."""
    return AssetCache.configured(settings.asset_cache, offline=settings.offline_assets, mirror=settings.asset_mirror)


def regrade(settings: RegradeSettings, kept: KeptDesktop, attempt: AttemptId, *, score_before: float | None,
            work_dir: Path, stops: StopSignals) -> Regrade:
    """Score `kept` again with `settings` (the run's, for its task) and return the record; `attempt` names the
    regrade's guest (labels, container) and `work_dir` holds its files."""
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    phases = PhaseLog.writing_progress(str(attempt), work_dir)
    state = RegradeState(settings=settings, attempt=attempt, result_dir=work_dir, phases=phases,
                         boot_timeout_sec=settings.timeout_seconds or float("inf"), asset_source=run_assets,
                         kept=kept)
    record = Regrade(attempt_id=kept.attempt_id, task_id=kept.task_id, repeat=attempt.repeat, status="error",
                     score_before=score_before, score_after=None, task_sha256_then=kept.task_sha256,
                     evaluator_sha256_then=kept.evaluator_sha256, regraded_at=started, duration_sec=0.0)

    def done(state: RegradeState, failure: Failure | None) -> None:
        if state.task is not None:
            record.task_sha256_now, record.evaluator_sha256_now = state.task.sha256, evaluator_sha256(state.task)
        record.desktop_env_now = state.meta.osworld.desktop_env
        if failure is None and state.evaluation is not None:
            record.status, record.evaluator_score = "completed", state.evaluation.score
            record.score_after = counted_score(None, kept.termination_reason, state.evaluation.score)
        else:
            assert failure is not None
            record.status = "evaluator_error" if failure.classification == "evaluator" else "error"
            record.failure_classification, record.failure_message = failure.classification, failure.message
        record.phases = phases.phases
        record.duration_sec = round(time.time() - started, 3)
        write_record(work_dir / "meta.json", state.meta)

    run_phases(state, PHASES, CLOSING, log_=phases, stops=stops, record=done)
    return record
