"""The one translation of what ends an attempt into the error table's classes (hcu.osworld.errors).

A phase decides its own failures where it can (a `PhaseError` subclass); a deadline or a stop signal is an
`AttemptEnded`. Everything else comes from below hcu's phases, and its class depends on where it happened: a
failed OSWorld call in setup is a setup failure, in evaluation an evaluator failure, unless the table fixes the
class whatever the phase (a missing function, a missing module, an asset an offline cache lacks). Only the
attempt runner calls `translate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker.errors
import requests

from hcu.osworld.errors import OSWORLD_ERROR_CLASSES, AttemptEnded, FailureClass, PhaseError
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.osworld_bridge.assets import AssetError, OfflineAssetMiss
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.protocol import one_line
from hcu.osworld.osworld_bridge.setup import SetupStepError

GUEST_FAILURES = (GuestAPIError, docker.errors.DockerException, requests.RequestException)
"""The guest or the engine under it stopped answering: infrastructure, whatever the phase."""


@dataclass(frozen=True)
class Failure:
    classification: FailureClass
    message: str


def translate(exc: BaseException, phase_failure: FailureClass) -> Failure:
    """The class and one-line message of `exc`, which ended a phase whose failures are `phase_failure`."""
    return Failure(_classify(exc, phase_failure), _message(exc))


def _classify(exc: BaseException, phase_failure: FailureClass) -> FailureClass:
    if isinstance(exc, (AttemptEnded, PhaseError)):
        return exc.classification
    if isinstance(exc, SetupStepError):
        return phase_failure if exc.cause is None else _classify(exc.cause, phase_failure)
    if isinstance(exc, OSWorldCodeError):
        return OSWORLD_ERROR_CLASSES.get(exc.kind, phase_failure)
    if isinstance(exc, OfflineAssetMiss):
        return "configuration"
    if isinstance(exc, AssetError):
        return phase_failure
    if isinstance(exc, GUEST_FAILURES):
        return "guest"
    return "runner"  # a bug in hcu: recorded, never read as an agent or infrastructure failure


def _message(exc: BaseException) -> str:
    known = (AttemptEnded, PhaseError, SetupStepError, OSWorldCodeError, AssetError, GuestAPIError)
    text = str(exc) if isinstance(exc, known) and str(exc) else f"{type(exc).__name__}: {exc}"
    return one_line(text)
