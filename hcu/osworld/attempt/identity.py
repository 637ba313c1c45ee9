"""The attempt id: one id that follows an attempt through labels, gateway scope, logs, results and cleanup."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

LABEL_PREFIX = "hcu."
LABEL_RUN_ID = "hcu.run_id"
LABEL_TASK_ID = "hcu.task_id"
LABEL_ATTEMPT = "hcu.attempt"
LABEL_MANAGED = "hcu.managed"
"""Present on everything hcu starts, so a cleanup can find it even when the other labels are unknown."""


class AttemptId(BaseModel):
    """One task run once: `<run_id>/<task_id>/<attempt>`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    attempt: int = Field(ge=1)

    def __str__(self) -> str:
        return f"{self.run_id}/{self.task_id}/{self.attempt}"

    def labels(self) -> dict[str, str]:
        """Docker labels for every container, volume and overlay this attempt creates."""
        return {
            LABEL_MANAGED: "1",
            LABEL_RUN_ID: self.run_id,
            LABEL_TASK_ID: self.task_id,
            LABEL_ATTEMPT: str(self.attempt),
        }

    @property
    def gateway_scope(self) -> str:
        """The task scope in gateway URLs (`/t/<scope>/...`): the attempt id with dots, so a retried attempt
        and another run's attempt of the same task on the same gateway each start with a fresh budget."""
        return f"{self.run_id}.{self.task_id}.a{self.attempt}"
