"""The records of a Harbor job folder, as far as hcu writes them: the field names and meanings of Harbor 0.26's own
models (`harbor.models.job.config.JobConfig`, `harbor.models.job.result.JobResult`,
`harbor.models.trial.config.TrialConfig`, `harbor.models.trial.result.TrialResult`), which a test reads every
written file back with. hcu cannot import Harbor (it needs Python 3.12), so these are its own.

Fields Harbor defaults are left out; hcu's own facts go into the one free-form place Harbor gives a trial,
`agent_result.metadata["hcu"]`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel

REWARD_KEY = "reward"
"""The one reward of a trial: the score that counts (OSWorld's 0..1)."""
MEAN_METRIC = "mean"
"""Harbor's default metric of a dataset: the mean reward over the trials that have one."""


class TimingInfo(BaseModel):
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ExceptionInfo(BaseModel):
    """Why a trial has no reward (a withheld attempt): Harbor counts the trial as errored."""

    exception_type: str
    exception_message: str
    exception_traceback: str = ""
    occurred_at: datetime
    policy_override: dict[str, bool] | None = None
    """`{"has_valid_reward": false}`: no Harbor tool ever reads a reward into it."""


class ModelInfo(BaseModel):
    name: str
    provider: str | None = None


class AgentInfo(BaseModel):
    name: str
    version: str
    model_info: ModelInfo | None = None


class AgentUsage(BaseModel):
    """Harbor's `AgentContext`: the agent's tokens (input with cached included) and cost; None when unknown. An
    export shape: an attempt's `records.result.Usage` as a Harbor trial states it, nothing hcu reads back."""

    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    metadata: dict[str, Any] | None = None


class VerifierResult(BaseModel):
    rewards: dict[str, float] | None = None


class LocalTaskId(BaseModel):
    path: str


class TaskConfig(BaseModel):
    path: str
    source: str | None = None


class AgentConfig(BaseModel):
    name: str | None = None
    model_name: str | None = None
    kwargs: dict[str, Any] = {}
    """`reasoning_effort`: the effort the model ran at (Harbor's viewer reads it from here)."""


class TrialConfig(BaseModel):
    task: TaskConfig
    trial_name: str
    trials_dir: str
    agent: AgentConfig
    job_id: UUID


class TrialResult(BaseModel):
    id: UUID
    task_name: str
    trial_name: str
    trial_uri: str
    task_id: LocalTaskId
    source: str | None = None
    task_checksum: str
    config: TrialConfig
    agent_info: AgentInfo
    agent_result: AgentUsage | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    environment_setup: TimingInfo | None = None
    agent_setup: TimingInfo | None = None
    agent_execution: TimingInfo | None = None
    verifier: TimingInfo | None = None

    @property
    def reward(self) -> float | None:
        rewards = self.verifier_result.rewards if self.verifier_result else None
        return rewards.get(REWARD_KEY) if rewards else None


class EvalStats(BaseModel):
    """Harbor's `AgentDatasetStats`: one agent and model on one dataset."""

    n_trials: int = 0
    """Trials with a reward."""
    n_errors: int = 0
    metrics: list[dict[str, float | int]] = []
    """Harbor's mean first; with a do-nothing baseline, its metric second (harbor_export.BASELINE_METRIC)."""
    reward_stats: dict[str, dict[float, list[str]]] = {}
    """Reward name -> value -> the trials that got it."""
    exception_stats: dict[str, list[str]] = {}


class JobStats(BaseModel):
    n_completed_trials: int = 0
    n_errored_trials: int = 0
    n_running_trials: int = 0
    n_pending_trials: int = 0
    n_cancelled_trials: int = 0
    n_retries: int = 0
    evals: dict[str, EvalStats] = {}
    """Keyed `<agent>__<model>__<dataset>` (Harbor's `JobStats.format_agent_evals_key`)."""
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class JobConfig(BaseModel):
    job_name: str
    jobs_dir: str
    n_attempts: int = 1
    """Repeats of each task."""
    agents: list[AgentConfig] = []


class JobResult(BaseModel):
    id: UUID
    started_at: datetime
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    n_total_trials: int
    stats: JobStats


def evals_key(agent: str, model: str | None, dataset: str) -> str:
    return f"{agent}__{model}__{dataset}" if model else f"{agent}__{dataset}"
