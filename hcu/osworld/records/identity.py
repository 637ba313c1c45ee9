"""The attempt id: one id that follows an attempt through labels, gateway scope, logs, results and cleanup.

A task may be run several times for a score (its repeats, each with its own identity); each repeat may take
several attempts (infrastructure retries). Repeat 1 keeps the names a run without repeats has always had
(`tasks/<task>/`, scope `<run>.<task>.a<n>`); repeat r >= 2 adds `.r<r>` to the task part of every name
(`tasks/<task>.r<r>/`, scope `<run>.<task>.r<r>.a<n>`), so a task id must not end that way itself.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

LABEL_PREFIX = "hcu."
LABEL_RUN_ID = "hcu.run_id"
LABEL_TASK_ID = "hcu.task_id"
LABEL_REPEAT = "hcu.repeat"
LABEL_ATTEMPT = "hcu.attempt"
LABEL_MANAGED = "hcu.managed"
"""Present on everything hcu starts, so a cleanup can find it even when the other labels are unknown."""

REPEAT_SUFFIX = re.compile(r"\.r([1-9]\d*)$")
"""How a repeat r >= 2 marks the task part of its names."""


def repeat_key(task_id: str, repeat: int) -> str:
    """The task part of a repeat's names: the task id for repeat 1, `<task>.r<repeat>` after it."""
    return task_id if repeat == 1 else f"{task_id}.r{repeat}"


def split_repeat_key(key: str) -> tuple[str, int]:
    """(task id, repeat) of a name made by `repeat_key`."""
    match = REPEAT_SUFFIX.search(key)
    if match is None or match.group(1) == "1":
        return key, 1
    return key[: match.start()], int(match.group(1))


def ambiguous_task_id(task_id: str) -> bool:
    """True for a task id that would read as a repeat of another task (`<id>.r<n>`)."""
    return re.search(r"\.r\d+$", task_id) is not None


class AttemptId(BaseModel):
    """One attempt of one repeat of a task: `<run_id>/<task_id>/<attempt>` (repeat 1) or
    `<run_id>/<task_id>.r<repeat>/<attempt>`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    attempt: int = Field(ge=1)
    repeat: int = Field(default=1, ge=1)
    """Which scored run of the task this is (a repeat is not a retry: each has its own attempts)."""

    @property
    def task_key(self) -> str:
        """The task part of this attempt's names: folders under tasks/ and retries/, logs, scope."""
        return repeat_key(self.task_id, self.repeat)

    def __str__(self) -> str:
        return f"{self.run_id}/{self.task_key}/{self.attempt}"

    def labels(self) -> dict[str, str]:
        """Docker labels for every container, volume and overlay this attempt creates."""
        return {
            LABEL_MANAGED: "1",
            LABEL_RUN_ID: self.run_id,
            LABEL_TASK_ID: self.task_id,
            LABEL_REPEAT: str(self.repeat),
            LABEL_ATTEMPT: str(self.attempt),
        }

    @property
    def gateway_scope(self) -> str:
        """The task scope in gateway URLs (`/t/<scope>/...`): the attempt id with dots, so a retried attempt,
        another repeat and another run's attempt of the same task on the same gateway each start with a fresh
        budget."""
        return f"{self.run_id}.{self.task_key}.a{self.attempt}"


def attempt_of_scope(scope: str, run_id: str, task_ids: frozenset[str]) -> AttemptId | None:
    """The attempt of run `run_id` (one of `task_ids`) a gateway scope belongs to; None for another run's."""
    prefix = f"{run_id}."
    if not scope.startswith(prefix):
        return None
    key, dot, attempt = scope[len(prefix):].rpartition(".a")
    if not dot or not attempt.isdigit() or int(attempt) < 1:
        return None
    task_id, repeat = split_repeat_key(key)
    if task_id not in task_ids:
        return None
    return AttemptId(run_id=run_id, task_id=task_id, attempt=int(attempt), repeat=repeat)
