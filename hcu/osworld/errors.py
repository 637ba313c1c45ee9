"""The one error table: every failure class, where it comes from, and what retry, scoring and summaries do; and
the one exception tree of hcu.osworld.

A failure is classified where it happens (a phase raises a `PhaseError` subclass, a deadline or a stop signal
ends it with an `AttemptEnded`, and the attempt runner translates lower-level errors once, by the phase they end);
`run_task` (its exit status), the queue (retry, pause, stop), resume and `summarize` (score or
withhold) all read `policy_for(failure_classification)` rather than guessing from logs. Stored results resolve
like live ones, because the key is the class name recorded in result.json.

Every exception hcu.osworld raises derives from one of two roots. Each boundary translates what the library
under it raises into this tree once, where it is crossed: Docker's errors (docker.errors, and the requests
errors of its transport) become a `DockerEngineError` (guest.docker_engine.engine_calls) or the `GuestError` of
the readiness step they end, the in-guest API's (requests) a `GuestAPIError` (guest.api), OSWorld's process an
`OSWorldCodeError` (osworld_bridge.process), downloads an `AssetError` (osworld_bridge.assets); the agent
CLIs' processes run in the guest, so their failures arrive as `GuestAPIError`s or as what their adapters read
of them. Only `hcu.osworld.attempt.failures` turns the tree into failure classes.

    HcuOSWorldError                     hcu.osworld.errors
    ├── PhaseError                      a failure a phase decided, carrying its class
    │   ├── GuestError                  guest
    │   │   ├── DockerEngineError       guest.docker_engine: the engine refused a call or did not answer
    │   │   ├── MonitorError            guest.monitor: QEMU's monitor refused a command or did not answer
    │   │   └── GuestMemoryError        guest_memory
    │   ├── GuestFloodError             guest_flood
    │   ├── SetupError                  setup
    │   │   └── AppMissing              attempt.app_check
    │   ├── GatewayError                gateway
    │   ├── ProbeError                  probe
    │   ├── EvaluatorError              evaluator
    │   ├── ConfigurationError          configuration
    │   │   └── MissingApplication      osworld_bridge.setup
    │   ├── TaskError                   osworld_bridge.tasks (its class set per task file)
    │   └── SweepError                  canary.sweep
    ├── GuestAPIError                   guest.api: a call into the guest failed
    ├── _TransientStatus                guest.api: a 502, 503 or 504 asked again; never leaves its retry
    ├── AssetError                      osworld_bridge.assets
    │   └── OfflineAssetMiss            osworld_bridge.assets: offline, and the cache lacks the file
    ├── OSWorldCodeError                osworld_bridge.process: OSWorld's process failed, with its kind
    ├── ProtocolError                   osworld_bridge.protocol: a message out of protocol
    ├── SetupStepError                  osworld_bridge.setup: a setup step failed (its cause, if any, attached)
    ├── Failure                         osworld_bridge.child.v1: inside OSWorld's process, sent back as a kind
    ├── ConfigError                     run_config: a run config that cannot run
    ├── QueueRefused                    queue.executor
    ├── QueueStopped                    queue.panel
    ├── QueueDrained                    queue.panel: `ctl drain` ended the queue with repeats left
    ├── ControlError                    queue.control: a `ctl` command that cannot be applied
    ├── GatewayMismatch                 queue.gate
    ├── ManifestMismatch                queue.manifest
    ├── NodeGatewayError                queue.node_gateway
    ├── AttemptGone                     queue.ray_node (also a LookupError)
    ├── FetchError                      agents.fetch: an agent CLI's files could not be fetched
    ├── PilotError                      quota.profile: a forecast_from entry that is not a run of this agent
    ├── SweepUnreadable                 records.sweep_file: a folder that is not a canary sweep's
    ├── SummaryError                    summary.run_summary
    ├── SummaryUnreadable               summary.model: a summary.json that does not read
    ├── RegradeRefused                  regrading.run: a run, task or selection without a kept desktop
    ├── RunDirError                     view.data
    ├── ExportError                     view.export
    ├── ExportRefused                   evidence.export_folder: an output folder that is not an earlier export
    └── PathRefused                     view.paths (also a ValueError)

    AttemptEnded (a BaseException)      a phase deadline or a stop signal
    ├── PhaseTimeout
    │   ├── BootTimeout                 guest
    │   ├── SetupTimeout                setup
    │   ├── ProbeTimeout                probe
    │   └── EvaluationTimeout           evaluator
    └── Interrupted                     interrupted

`AttemptEnded` stays outside `HcuOSWorldError` on purpose: it must pass every `except Exception` on its way.

Standard library only: OSWorld's process (osworld_bridge.child) raises this tree too, in whatever interpreter
runs OSWorld. The retry limits are `hcu.defaults.RETRIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FailureClass = Literal[
    "guest",  # the container/VM did not start, did not become ready in time, or died
    "guest_memory",  # the guest's image refused to start: RAM_SIZE plus its overhead exceeded free memory (exit 17)
    "guest_flood",  # the guest's requests the gateway answers for free reached its token-log ceiling for the scope
    "setup",  # the task's setup steps failed or overran the phase timeout
    "gateway",  # the gateway was unreachable (past the tolerated absence) or its budget differs from the config
    "probe",  # executables or the MCP probe failed before the agent started
    "upstream_rate_limit",  # the agent's turn still ended on a rate limit after its session resumes (RETRIES)
    "upstream_error",  # five consecutive failed generations, or the CLI gave up after upstream failures
    "interrupted",  # the runner was stopped (SIGTERM/SIGINT) or died before the attempt finished
    "node_lost",  # the attempt's Ray node died or was drained mid-attempt (the ray executor's head says so)
    "configuration",  # a prerequisite is missing or wrong: it fails the same way every time
    "agent",  # the agent CLI could not be run or its output could not be read
    "evaluator",  # the official evaluator raised or overran: no score, never a zero
    "runner",  # a bug in hcu itself
]


@dataclass(frozen=True)
class ErrorPolicy:
    retry: bool
    """The queue sets the attempt aside under retries/ and runs the task again (infrastructure, not the agent)."""
    scored: bool
    """The evaluator's score counts. False: the score is withheld (no usable score, never a silent zero)."""
    zero_on_limit: bool
    """A task that hit the budget or the timeout scores 0 even so (the evaluator's verdict no longer matters)."""
    stop_queue: bool = False
    """The queue launches nothing more and says why: every other attempt would fail the same way."""
    pause_launches_sec: float = 0.0
    """How long the queue holds new launches after this failure (a rate-limited run cools down)."""
    exit_status: int = 1
    """run_task's exit status for an attempt that ended here."""
    about_task: bool = True
    """False when the failure says nothing about the task (its guest never served it, or the runner stopped):
    a canary sweep runs that task's canary again."""
    lowers_active_tasks: bool = False
    """The queue runs one attempt fewer at once from then on (never fewer than one): the hosts had less memory
    than the queue's concurrency assumed, so its retry is not a blind one."""


CLEAN = ErrorPolicy(retry=False, scored=True, zero_on_limit=True, exit_status=0)
"""An attempt without a failure class: the evaluator's score (0 on budget or timeout)."""
_INFRASTRUCTURE = ErrorPolicy(retry=True, scored=False, zero_on_limit=False)
_NOT_ABOUT_THE_TASK = ErrorPolicy(retry=True, scored=False, zero_on_limit=False, about_task=False)
_UNSCORED = ErrorPolicy(retry=False, scored=False, zero_on_limit=False)

POLICIES: dict[str, ErrorPolicy] = {
    "guest": _NOT_ABOUT_THE_TASK,
    "guest_memory": ErrorPolicy(retry=True, scored=False, zero_on_limit=False, about_task=False,
                                lowers_active_tasks=True),
    # The attempt's own guest flooded the gateway with requests it refused (or free calls) until its scope's
    # token-log ceiling: the agent misbehaved, so its score is withheld, and the queue does not rerun the task
    # blindly, since the same agent on the same task would most likely flood again (a rerun is a decision).
    "guest_flood": _UNSCORED,
    "setup": _INFRASTRUCTURE,
    "gateway": _INFRASTRUCTURE,
    "probe": _INFRASTRUCTURE,
    "upstream_rate_limit": ErrorPolicy(retry=True, scored=False, zero_on_limit=False, pause_launches_sec=300.0),
    "upstream_error": _INFRASTRUCTURE,
    "interrupted": _NOT_ABOUT_THE_TASK,
    "node_lost": _NOT_ABOUT_THE_TASK,
    "configuration": ErrorPolicy(retry=False, scored=False, zero_on_limit=False, stop_queue=True, exit_status=2),
    "agent": _UNSCORED,
    "evaluator": ErrorPolicy(retry=False, scored=False, zero_on_limit=True),
    "runner": _UNSCORED,
}

LIMIT_TERMINATIONS = ("max_model_calls", "timeout")
"""Termination reasons that score 0 whatever the evaluator said (or whether it could say anything)."""

def policy_for(failure_classification: str | None) -> ErrorPolicy:
    """The policy for a recorded classification: CLEAN for none; a class this table does not know (a result
    from another version) is neither retried nor scored, like a runner bug."""
    if failure_classification is None:
        return CLEAN
    return POLICIES.get(failure_classification, POLICIES["runner"])


STATUS_CLASSES = {"evaluator_error": "evaluator", "error": "runner"}
"""The class a result without `failure_classification` is read as (a reference-only result.json)."""


def class_of(failure_classification: str | None, status: str) -> str | None:
    """A result's class; a result with only the reference's fields names none, so its status stands in."""
    return failure_classification or STATUS_CLASSES.get(status)


def counted_score(failure_classification: str | None, termination_reason: str | None,
                  score: float | None) -> float | None:
    """The score that counts for one attempt, None when it is withheld."""
    policy = policy_for(failure_classification)
    if policy.zero_on_limit and termination_reason in LIMIT_TERMINATIONS:
        return 0.0
    return score if policy.scored else None


class HcuOSWorldError(Exception):
    """The root of every exception hcu.osworld raises (the tree is in this module's docstring), except
    `AttemptEnded`. Messages are one line and never hold credentials."""


class PhaseError(HcuOSWorldError):
    """A failure a phase decided where it happened, carrying its class. Messages never hold credentials.
    Lower-level errors (the guest API, Docker, OSWorld's process, the asset cache) are not PhaseErrors: the
    attempt runner translates them once, by the phase they end (hcu.osworld.attempt.failures)."""

    classification: FailureClass = "runner"

    def __init__(self, message: str, *, classification: FailureClass | None = None) -> None:
        super().__init__(message)
        if classification is not None:
            self.classification = classification


class GuestError(PhaseError):
    classification = "guest"


class DockerEngineError(GuestError):
    """The Docker engine refused a call or did not answer (guest.docker_engine.engine_calls)."""


class GuestMemoryError(GuestError):
    """The guest's image exited for lack of memory (the official image's exit 17) although hcu's memory admission
    let it start: something outside hcu took the memory meanwhile."""

    classification = "guest_memory"


class GuestFloodError(PhaseError):
    """The gateway closed the attempt's scope: what its guest sent for free reached the scope's token-log
    ceiling (the gateway's `max_log_bytes_per_scope`)."""

    classification = "guest_flood"


class SetupError(PhaseError):
    classification = "setup"


class GatewayError(PhaseError):
    classification = "gateway"


class ProbeError(PhaseError):
    classification = "probe"


class EvaluatorError(PhaseError):
    classification = "evaluator"


class ConfigurationError(PhaseError):
    """A missing or wrong prerequisite (KVM, an image, a binary, an artifact, a task file, an asset missing
    from an offline cache, an image smaller than volume_size, a client_password the guest refuses, a guest
    larger than the host's memory): retrying cannot help."""

    classification = "configuration"


class AttemptEnded(BaseException):
    """Ends an attempt wherever it is blocked: a phase deadline or a stop signal. A BaseException, so no
    `except Exception` on the way can swallow it or relabel it as the failure of what it interrupted."""

    classification: FailureClass = "runner"


class PhaseTimeout(AttemptEnded):
    """Raised when a phase overruns its deadline; each phase that has one has its own type and class."""


class BootTimeout(PhaseTimeout):
    classification = "guest"


class SetupTimeout(PhaseTimeout):
    classification = "setup"


class ProbeTimeout(PhaseTimeout):
    classification = "probe"


class EvaluationTimeout(PhaseTimeout):
    classification = "evaluator"


class Interrupted(AttemptEnded):
    """SIGTERM/SIGINT reached the runner: the attempt ends as `interrupted`, recorded and cleaned up."""

    classification = "interrupted"


OSWORLD_ERROR_CLASSES: dict[str, FailureClass] = {
    "missing_function": "evaluator",  # a metric or getter the task names is not in this OSWorld: never scorable
    "missing_module": "configuration",  # the OSWorld interpreter lacks a module its code imports
    "needs": "configuration",  # a V2 task needs a service this run does not provide
    "task": "configuration",  # a V2 task file that does not load
    "protocol": "runner",  # hcu spoke to its OSWorld process out of protocol
}
"""Failures of OSWorld's process whose class does not depend on the phase they end; any other kind (a step that
failed, an exception, a deadline, a crash) is a failure of the phase it happened in."""
