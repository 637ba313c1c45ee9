"""The one error table: every failure class, where it comes from, and what retry, grading and summaries do.

A failure is classified where it happens (a phase raises a `PhaseError` subclass); `run_queue`, `summarize`
and resume all read `policy_for(failure_classification)` rather than guessing from logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FailureClass = Literal[
    "guest",  # the container/VM did not start or died
    "setup",  # the task's setup steps failed
    "gateway",  # the gateway was unreachable or its budget differs from the config
    "probe",  # executables or the MCP probe failed before the agent started
    "upstream_rate_limit",  # the agent's turn still ended on a rate limit after two session resumes
    "interrupted",  # the runner died or was stopped before the attempt finished
    "upstream_failures",  # five consecutive failed generations (not rate limits)
    "agent",  # the agent CLI could not be run or its output could not be read
    "evaluator",  # the official evaluator raised: no score, never a zero
    "runner",  # a bug in hcu itself
]


@dataclass(frozen=True)
class ErrorPolicy:
    infrastructure: bool
    """True when the failure says nothing about the agent: the attempt is moved to retries/ and rerun."""
    retry: bool
    pause_launches_sec: float = 0.0
    """How long the queue holds new launches after this failure (a rate-limited run cools down)."""


POLICIES: dict[str, ErrorPolicy] = {
    "guest": ErrorPolicy(infrastructure=True, retry=True),
    "setup": ErrorPolicy(infrastructure=True, retry=True),
    "gateway": ErrorPolicy(infrastructure=True, retry=True),
    "probe": ErrorPolicy(infrastructure=True, retry=True),
    "upstream_rate_limit": ErrorPolicy(infrastructure=True, retry=True, pause_launches_sec=300.0),
    "interrupted": ErrorPolicy(infrastructure=True, retry=True),
    "node_lost": ErrorPolicy(infrastructure=True, retry=True),  # the attempt's Ray node died or was drained
    "upstream_failures": ErrorPolicy(infrastructure=False, retry=False),
    "agent": ErrorPolicy(infrastructure=False, retry=False),
    "evaluator": ErrorPolicy(infrastructure=False, retry=False),
    "runner": ErrorPolicy(infrastructure=False, retry=False),
}

MAX_ATTEMPTS = 4
"""The first attempt plus at most three infrastructure retries."""
RETRY_POLICY = (f"infrastructure failures rerun the task, at most {MAX_ATTEMPTS} attempts; the one attempt "
                "left in tasks/ is scored (never a best-of or mean); retries/ are kept and never scored")
"""How a score relates to retries, as manifest.json and summary.json state it."""


def policy_for(failure_classification: str | None) -> ErrorPolicy | None:
    """The policy for a recorded classification; None for a clean attempt or an unknown class."""
    if failure_classification is None:
        return None
    return POLICIES.get(failure_classification)


class PhaseError(Exception):
    """A failure raised by a pipeline phase, carrying its classification. Messages never hold credentials."""

    classification: FailureClass = "runner"

    def __init__(self, message: str, *, classification: FailureClass | None = None) -> None:
        super().__init__(message)
        if classification is not None:
            self.classification = classification


class GuestError(PhaseError):
    classification = "guest"


class SetupError(PhaseError):
    classification = "setup"


class GatewayError(PhaseError):
    classification = "gateway"


class ProbeError(PhaseError):
    classification = "probe"


class EvaluatorError(PhaseError):
    classification = "evaluator"
