"""An hcu run as a Harbor job, for `harbor view` and the tools that read Harbor's job folders:
`<out>/<run name>/` holding

- `config.json` (Harbor's JobConfig: the agent, its model and effort, the repeats) and `result.json` (JobResult:
  trial counts, the mean reward per agent and model, tokens and cost);
- one trial folder per attempt in `tasks/` (`<task id>`, `<task id>.r<n>` for repeat n) with `config.json`,
  `result.json` (TrialResult: the reward, tokens, cost, phase timings, and why a withheld attempt has none),
  `agent/trajectory.json` (ATIF at the current version: a trajectory of an earlier hcu has its screenshots moved
  into image content parts), the screenshots it shows under `agent/steps/`, and `agent/recording.mp4`.

A withheld attempt (no usable score) is an errored trial without a reward, never a reward of 0. The mean is
Harbor's: over the trials that have a reward. With a do-nothing baseline in the run's summary.json (`summarize
--baseline`), a second metric beside it gives the same mean without the trials of tasks the evaluator passes
untouched, and how many tasks pass untouched or are of unknown untouched score. A job total (tokens, cost) is
unknown when any trial's is.
Everything written is redacted; files carry the permissions of the attempt's result.json.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import orjson

from hcu.osworld.errors import class_of
from hcu.osworld.evidence.atif import SCHEMA_VERSION, ContentPart, Trajectory, image_part, text_part
from hcu.osworld.evidence.export_folder import FileWriter, claim_out_dir
from hcu.osworld.evidence.harbor_records import (
    MEAN_METRIC,
    REWARD_KEY,
    AgentConfig,
    AgentInfo,
    AgentUsage,
    EvalStats,
    ExceptionInfo,
    JobConfig,
    JobResult,
    JobStats,
    LocalTaskId,
    ModelInfo,
    TaskConfig,
    TimingInfo,
    TrialConfig,
    TrialResult,
    VerifierResult,
    evals_key,
)
from hcu.osworld.evidence.kept_attempts import KeptAttempt, kept_attempts
from hcu.osworld.evidence.recording import RECORDING_NAME
from hcu.osworld.evidence.redact import Redactor
from hcu.osworld.records.layout import META_FILE, TRAJECTORY_FILE
from hcu.osworld.records.result import PhaseTiming
from hcu.osworld.summary.model import SummaryUnreadable, parse_summary
from hcu.osworld.summary.parts import Baseline

DATASET = "osworld"
"""The trials' `source`: the dataset Harbor groups rewards by."""
AGENT_DIR = "agent"
IDS = uuid.UUID("6d1f3c52-5f0e-4d47-9a43-0b6c1e0a8f21")
"""The namespace of the job and trial ids: the same run exports with the same ids."""
BASELINE_METRIC = "mean_without_untouched_passes"
"""The second metric's mean: Harbor's, without the trials of tasks the evaluator passes in their untouched state."""
TIMED_PHASES = {"environment_setup": ("boot", "isolate", "setup"), "agent_setup": ("upload", "probe"),
                "agent_execution": ("agent",), "verifier": ("evaluate",)}
"""Harbor's timed parts of a trial, from hcu's phases."""


@dataclass
class HarborExport:
    job_dir: Path
    trials: list[TrialResult]
    job: JobResult

    @property
    def withheld(self) -> int:
        return sum(trial.exception_info is not None for trial in self.trials)


def export_harbor_job(run_dir: Path, out: Path) -> HarborExport:
    """Raises ExportRefused when `out` is neither new, empty nor an earlier harbor export."""
    claim_out_dir(out, "harbor", run_dir)
    redactor = Redactor.for_run(run_dir)
    job_name = run_dir.resolve().name
    job_dir = out / job_name
    attempts = list(kept_attempts(run_dir))
    run_id = next((a.result.run_id for a in attempts if a.result and a.result.run_id), job_name)
    job_id = uuid.uuid5(IDS, f"run {run_id}")
    run_agent = (next((a.trajectory.agent.name for a in attempts if a.trajectory), None)  # the name ATIF readers know
                 or next((a.result.agent for a in attempts if a.result and a.result.agent), None),
                 next((a.result.model for a in attempts if a.result and a.result.model), None))
    trials = [_export_trial(attempt, job_dir, job_id, run_agent, redactor) for attempt in attempts]
    retries = sum(1 for p in (run_dir / "retries").iterdir() if p.is_dir()) if (run_dir / "retries").is_dir() else 0
    config = JobConfig(job_name=job_name, jobs_dir=str(out.resolve()), n_attempts=max(
        (a.repeat for a in attempts), default=1), agents=_agents(trials))
    job = _job_result(job_id, trials, retries, fallback_start=run_dir.stat().st_mtime, baseline=_baseline(run_dir))
    job_files = FileWriter(job_dir, None)
    _write(job_files, "config.json", config)
    _write(job_files, "result.json", job)
    return HarborExport(job_dir, trials, job)


def _export_trial(attempt: KeptAttempt, job_dir: Path, job_id: uuid.UUID, run_agent: tuple[str | None, str | None],
                  redactor: Redactor) -> TrialResult:
    """`run_agent`: the run's agent (as its trajectories name it) and model, for an attempt that left no record."""
    result, trajectory = attempt.result, attempt.trajectory
    trial_dir = job_dir / attempt.folder
    agent_files = FileWriter(trial_dir / AGENT_DIR, attempt.mode)
    agent_name = (trajectory.agent.name if trajectory else None) or run_agent[0] or "unknown"
    model = (result.model if result else None) or (trajectory.agent.model_name if trajectory else None) or run_agent[1]
    task = TaskConfig(path=f"{DATASET}/{attempt.domain}/{attempt.task_id}", source=DATASET)
    config = TrialConfig(task=task, trial_name=attempt.folder, trials_dir=str(job_dir.resolve()), job_id=job_id,
                         agent=AgentConfig(name=agent_name, model_name=model, kwargs=_effort(attempt, trajectory)))
    kept = _write_trajectory(trajectory, attempt, agent_files, redactor) if trajectory else "none in the attempt"
    if (attempt.task_dir / RECORDING_NAME).is_file():
        agent_files.copy(RECORDING_NAME, attempt.task_dir / RECORDING_NAME)
    phases = result.phases if result else []
    trial = TrialResult(
        id=uuid.uuid5(IDS, f"trial {job_id} {attempt.folder}"), task_name=attempt.task_id,
        trial_name=attempt.folder, trial_uri=trial_dir.resolve().as_uri(), task_id=LocalTaskId(path=task.path),
        source=DATASET, task_checksum=_task_checksum(attempt) or "unknown", config=config,
        agent_info=AgentInfo(name=agent_name, version=(trajectory.agent.version if trajectory else None) or "unknown",
                             model_info=ModelInfo(name=model) if model else None),
        agent_result=_usage(attempt, kept, redactor),
        verifier_result=VerifierResult(rewards={REWARD_KEY: attempt.score}) if attempt.score is not None else None,
        exception_info=_withheld(attempt, redactor) if attempt.score is None else None,
        started_at=_when(result.started_at) if result else None,
        finished_at=_when(result.finished_at) if result else None,
        **{part: _timing(phases, names) for part, names in TIMED_PHASES.items()},
    )
    files = FileWriter(trial_dir, attempt.mode)
    _write(files, "config.json", config)
    _write(files, "result.json", trial)
    return trial


def _write_trajectory(trajectory: Trajectory, attempt: KeptAttempt, files: FileWriter, redactor: Redactor) -> str:
    """`agent/trajectory.json` and the screenshots it shows; what was kept (or why not), for the trial's record."""
    if not trajectory.steps:
        return "not exported: it has no steps (ATIF needs one)"
    current = trajectory.model_copy(deep=True)
    current.schema_version = SCHEMA_VERSION
    current.trajectory_id = current.trajectory_id or (attempt.result.attempt_id if attempt.result else None) \
        or attempt.folder
    left_out = 0
    for step in current.steps:
        for result in step.observation.results if step.observation else []:
            parts = _parts(result.content, result.extra.screenshot if result.extra else None)
            if result.extra is not None:
                result.extra.screenshot = None
            result.content = [part for part in parts if part.type != "image"
                              or _image_kept(part, attempt.task_dir, files)]
            left_out += len(parts) - len(result.content)
            if all(part.type == "text" for part in result.content):  # text alone stays a string, as ATIF allows
                result.content = result.text
    body = redactor.value(current.model_dump(mode="json", exclude_none=True))
    files.bytes(TRAJECTORY_FILE, orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return f"{SCHEMA_VERSION}, {len(current.steps)} steps" + (f", {left_out} missing images left out" if left_out
                                                              else "")


def _parts(content: str | list[ContentPart] | None, earlier_screenshot: str | None) -> list[ContentPart]:
    """A result's content as parts; an earlier hcu's `extra.screenshot` becomes the image part it is now."""
    parts = [text_part(content)] if isinstance(content, str) else list(content or [])
    if earlier_screenshot and not any(part.type == "image" for part in parts):
        parts.append(image_part(earlier_screenshot))
    return parts


def _image_kept(part: ContentPart, task_dir: Path, files: FileWriter) -> bool:
    """Copies the image into the trial's agent folder when it is a file inside the attempt's folder."""
    path = part.source.path if part.source else ""
    relative = PurePosixPath(path)
    if not path or relative.is_absolute() or ".." in relative.parts or "://" in path:
        return False
    source = task_dir / relative
    if not source.is_file() or not source.resolve().is_relative_to(task_dir.resolve()):
        return False
    files.copy(str(relative), source)
    return True


def _effort(attempt: KeptAttempt, trajectory: Trajectory | None) -> dict[str, str]:
    effort = attempt.result.effort if attempt.result else None
    if effort is None and trajectory is not None and trajectory.agent.extra:
        effort = trajectory.agent.extra.get("effort")
    return {"reasoning_effort": effort} if isinstance(effort, str) and effort else {}


def _usage(attempt: KeptAttempt, trajectory_note: str, redactor: Redactor) -> AgentUsage:
    """Tokens when the gateway accounted for every generation (else unknown), the cost when known, and hcu's own
    facts of the attempt."""
    result = attempt.result
    usage = result.usage if result else None
    accounted = usage if usage is not None and usage.fully_accounted else None
    facts = {"attempt_id": result.attempt_id, "repeat": attempt.repeat, "status": result.status,
             "score": attempt.score, "evaluator_score": result.evaluator_score,
             "termination_reason": result.termination_reason, "termination_detail": result.termination_detail,
             "failure_classification": result.failure_classification, "failure_message": result.failure_message,
             "protocol_word": result.protocol_word, "benchmark_version": result.benchmark_version,
             "usage": usage.model_dump() if usage else None} if result else {"status": "no readable result.json"}
    facts |= {"withheld": attempt.withheld, "trajectory": trajectory_note}
    return AgentUsage(n_input_tokens=accounted.input_tokens if accounted else None,
                      n_cache_tokens=accounted.cached_input_tokens if accounted else None,
                      n_output_tokens=accounted.output_tokens if accounted else None,
                      cost_usd=attempt.cost_usd, metadata={"hcu": redactor.value(facts)})


def _withheld(attempt: KeptAttempt, redactor: Redactor) -> ExceptionInfo:
    """A withheld attempt as the errored trial Harbor shows: its failure class as the exception's type."""
    result = attempt.result
    failure = class_of(result.failure_classification, result.status) if result else None
    kind = "".join(word.capitalize() for word in failure.split("_")) + "Error" if failure else "MissingResultError"
    message = f"withheld: {attempt.withheld}" + (f": {result.failure_message}" if result and result.failure_message
                                                 else "")
    moment = (result.finished_at or result.started_at) if result else None
    return ExceptionInfo(exception_type=kind, exception_message=redactor.text(message),
                         occurred_at=_when(moment or attempt.task_dir.stat().st_mtime),
                         policy_override={"has_valid_reward": False})


def _task_checksum(attempt: KeptAttempt) -> str | None:
    try:
        meta = orjson.loads((attempt.task_dir / META_FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    value = meta.get("task_sha256") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def _timing(phases: list[PhaseTiming], names: tuple[str, ...]) -> TimingInfo | None:
    ran = [p for p in phases if p.name in names and p.status != "skipped"]
    if not ran:
        return None
    return TimingInfo(started_at=_when(min(p.started_at for p in ran)),
                      finished_at=_when(max(p.started_at + p.duration_sec for p in ran)))


def _when(unix: float | None) -> datetime | None:
    return datetime.fromtimestamp(unix, timezone.utc) if unix is not None else None


def _agents(trials: list[TrialResult]) -> list[AgentConfig]:
    """Each agent and model of the job once, as its first trial ran it."""
    agents: dict[tuple[str | None, str | None], AgentConfig] = {}
    for trial in trials:
        agents.setdefault((trial.config.agent.name, trial.config.agent.model_name), trial.config.agent)
    return list(agents.values())


def _baseline(run_dir: Path) -> Baseline | None:
    """The do-nothing baseline summarize reported for the run (None without one, or without a summary.json that
    reads)."""
    try:
        summary, _ = parse_summary(orjson.loads((run_dir / "summary" / "summary.json").read_bytes()))
    except (OSError, orjson.JSONDecodeError, SummaryUnreadable):
        return None
    return summary.baseline


def _baseline_metric(rewards: list[tuple[str, float]], baseline: Baseline) -> dict[str, float | int]:
    """Harbor's mean over the rewarded trials, without those of tasks passing untouched; and the tasks' counts."""
    passing = {task.task_id for task in baseline.passes_untouched}
    kept = [reward for task, reward in rewards if task not in passing]
    mean = {BASELINE_METRIC: sum(kept) / len(kept)} if kept else {}
    return {**mean, "tasks_passing_untouched": len(passing), "tasks_of_unknown_untouched_score": len(baseline.unknown)}


def _job_result(job_id: uuid.UUID, trials: list[TrialResult], retries: int, fallback_start: float,
                baseline: Baseline | None = None) -> JobResult:
    stats = JobStats(n_completed_trials=len(trials), n_retries=retries,
                     n_errored_trials=sum(t.exception_info is not None for t in trials))
    for trial in trials:
        group = stats.evals.setdefault(_key_of(trial), EvalStats())
        if trial.reward is not None:
            group.n_trials += 1
            group.reward_stats.setdefault(REWARD_KEY, {}).setdefault(trial.reward, []).append(trial.trial_name)
        if trial.exception_info is not None:
            group.n_errors += 1
            group.exception_stats.setdefault(trial.exception_info.exception_type, []).append(trial.trial_name)
    for key, group in stats.evals.items():
        rewards = [(t.task_name, t.reward) for t in trials if t.reward is not None and _key_of(t) == key]
        group.metrics = [{MEAN_METRIC: sum(r for _, r in rewards) / len(rewards)}] if rewards else []
        if rewards and baseline is not None:
            group.metrics.append(_baseline_metric(rewards, baseline))
    usages = [t.agent_result for t in trials]
    for field in ("n_input_tokens", "n_cache_tokens", "n_output_tokens", "cost_usd"):
        values = [getattr(u, field) if u else None for u in usages]
        setattr(stats, field, sum(values) if values and None not in values else None)
    starts = [t.started_at for t in trials if t.started_at]
    ends = [t.finished_at for t in trials if t.finished_at]
    finished = max(ends) if ends and len(ends) == len(trials) else None
    return JobResult(id=job_id, started_at=min(starts) if starts else _when(fallback_start), updated_at=finished,
                     finished_at=finished, n_total_trials=len(trials), stats=stats)


def _key_of(trial: TrialResult) -> str:
    model = trial.agent_info.model_info.name if trial.agent_info.model_info else None
    return evals_key(trial.agent_info.name, model, trial.source or DATASET)


def _write(files: FileWriter, name: str, record: JobConfig | JobResult | TrialConfig | TrialResult) -> None:
    files.bytes(name, orjson.dumps(record.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
