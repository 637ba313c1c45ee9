"""The one translation of what ends an attempt into the error table's classes (hcu.osworld.errors).

A phase decides its own failures where it can (a `PhaseError` subclass); a deadline or a stop signal is an
`AttemptEnded`. Everything else comes from below hcu's phases, already in hcu's exception tree (each boundary
translates its library's errors: errors.py), and its class depends on where it happened: a failed OSWorld call
in setup is a setup failure, in evaluation an evaluator failure, unless the table fixes the class whatever the
phase (a missing function, a missing module, an asset an offline cache lacks). Only the attempt runner calls
`translate`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hcu.osworld.errors import OSWORLD_ERROR_CLASSES, AttemptEnded, FailureClass, HcuOSWorldError, PhaseError
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.osworld_bridge.assets import AssetError, OfflineAssetMiss
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.protocol import one_line
from hcu.osworld.osworld_bridge.setup import SetupStepError


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
    if isinstance(exc, GuestAPIError):  # the guest stopped answering: infrastructure, whatever the phase
        return "guest"
    return "runner"  # a bug in hcu (or an error no boundary translated): never an agent or infrastructure failure


def _message(exc: BaseException) -> str:
    own = isinstance(exc, (AttemptEnded, HcuOSWorldError)) and str(exc)
    text = str(exc) if own else f"{type(exc).__name__}: {exc}"
    return one_line(text)
