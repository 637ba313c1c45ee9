"""The one error table: every class decides retry, score and withhold there, and what ends a phase is translated
into a class once. Pure logic: the table, the translation, the scoring rule, the stop signals, the deadlines."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import signal
import time
from pathlib import Path
from typing import get_args

import docker.errors
import orjson
import pytest
import requests
from pydantic import ValidationError

import hcu.osworld
from hcu.osworld.attempt.agent_phase import AgentOutcome
from hcu.osworld.attempt.failures import translate
from hcu.osworld.errors import (
    CLEAN,
    POLICIES,
    AttemptEnded,
    DockerEngineError,
    FailureClass,
    HcuOSWorldError,
    Interrupted,
    SetupTimeout,
    counted_score,
    policy_for,
)
from hcu.osworld.guest.api import GuestAPIError
from hcu.osworld.guest.docker_engine import engine_calls
from hcu.osworld.osworld_bridge.assets import AssetError, OfflineAssetMiss
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.setup import SetupStepError
from hcu.osworld.queue.state import RetryNote
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.records.result import result_if_readable


def test_every_class_has_one_policy() -> None:
    assert set(get_args(FailureClass)) == set(POLICIES)
    assert policy_for(None) is CLEAN and CLEAN.scored and not CLEAN.retry
    assert policy_for("a-class-from-another-version") == POLICIES["runner"], "unknown: neither retried nor scored"
    assert not any(p.scored for p in POLICIES.values()), "a failure never yields the evaluator's score"


@pytest.mark.parametrize("error, phase, expected", [
    (OSWorldCodeError("setup step 0 (open)", "the guest answered 500", kind="step_failed"), "setup", "setup"),
    (OSWorldCodeError("evaluator", "exceeded its 5 s deadline", kind="deadline"), "evaluator", "evaluator"),
    (OSWorldCodeError("loading the evaluator", "no get_foo in this OSWorld", kind="missing_function"), "setup",
     "evaluator"),  # never scorable, whichever phase found out
    (OSWorldCodeError("osworld_python", "cannot import desktop_env", kind="missing_module"), "setup",
     "configuration"),
    (SetupStepError("postconfig step 0 failed", [], OfflineAssetMiss("asset not in the cache")), "evaluator",
     "configuration"),
    (SetupStepError("setup step 1 failed", [], AssetError("asset download failed: 503")), "setup", "setup"),
    (GuestAPIError("GET /screenshot", None, "timed out"), "evaluator", "guest"),
    (DockerEngineError("guest g: the Docker engine failed (APIError: 500)"), "evaluator", "guest"),
    (requests.ConnectionError("no boundary translated this"), "setup", "runner"),  # a bug in hcu's boundary
    (SetupTimeout("phase setup overran"), "setup", "setup"),
    (Interrupted("runner received SIGTERM"), "evaluator", "interrupted"),
    (KeyError("a bug"), "setup", "runner"),
])
def test_what_ends_a_phase_is_translated_once_by_the_phase_it_ends(error: BaseException, phase: FailureClass,
                                                                   expected: str) -> None:
    failure = translate(error, phase)
    assert failure.classification == expected
    assert "\n" not in failure.message and failure.message


def test_an_interruption_is_no_exception_a_broad_handler_can_relabel() -> None:
    """`except Exception` on the way (readiness, setup, evaluation) lets it through."""
    assert not issubclass(Interrupted, Exception)
    with pytest.raises(Interrupted):
        try:
            raise Interrupted("runner received SIGTERM")
        except Exception:  # what a phase's broad handler does
            pytest.fail("the interruption was caught as a phase failure")


@pytest.mark.parametrize("failure, termination, evaluator, counted", [
    (None, "completed", 1.0, 1.0),
    (None, "max_model_calls", 1.0, 0.0),
    (None, "timeout", 1.0, 0.0),
    ("evaluator", "completed", None, None),
    ("evaluator", "max_model_calls", None, 0.0),  # the budget ended it; the evaluator's failure no matter
    ("evaluator", "timeout", None, 0.0),
    ("upstream_rate_limit", "completed", None, None),
    ("interrupted", "max_model_calls", None, None),  # retried: the next attempt is the one scored
    ("configuration", None, None, None),
    ("runner", "timeout", None, None),
])
def test_the_score_that_counts(failure: str | None, termination: str | None, evaluator: float | None,
                               counted: float | None) -> None:
    assert counted_score(failure, termination, evaluator) == counted


@pytest.fixture
def stops():
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield StopSignals().install()
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def test_a_stop_signal_interrupts_the_phases_but_waits_for_the_record(stops: StopSignals) -> None:
    """while phases run, SIGTERM raises Interrupted; while the result is recorded it is held (so
    result.json is always written), and it still interrupts an attempt that has not started its phases."""
    with pytest.raises(Interrupted, match="SIGTERM"), stops.armed():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    os.kill(os.getpid(), signal.SIGTERM)  # while recording: held
    assert stops.received == "SIGTERM"
    with pytest.raises(Interrupted), stops.armed():
        pytest.fail("a signal that came before the phases must stop them before they start")


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class a module of hcu.osworld defines, by its qualified name."""
    found = {}
    for module in pkgutil.walk_packages(hcu.osworld.__path__, "hcu.osworld."):
        for name, value in vars(importlib.import_module(module.name)).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.name:
                found[f"{module.name}.{name}"] = value
    return found


def test_every_exception_of_hcu_osworld_derives_from_its_root() -> None:
    """One tree (drawn in errors.py): HcuOSWorldError, and AttemptEnded, a BaseException on purpose."""
    classes = exception_classes()
    assert len(classes) > 30, sorted(classes)  # the walk found the package's modules
    assert [name for name, cls in classes.items() if not issubclass(cls, (HcuOSWorldError, AttemptEnded))] == []
    assert not issubclass(AttemptEnded, Exception) and issubclass(HcuOSWorldError, Exception)
    refused, gone = classes["hcu.osworld.view.paths.PathRefused"], classes["hcu.osworld.queue.ray_node.AttemptGone"]
    assert issubclass(refused, ValueError) and issubclass(gone, LookupError), "`except ValueError` callers still work"


TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   )*)(?:[├└]── )?(?P<name>_?[A-Z]\w*)(?P<rest>.*)$")


def drawn_tree(doc: str) -> dict[str, tuple[str | None, str]]:
    """errors.py's drawing: each class with the class above it (None for a root) and what its line says."""
    drawn: dict[str, tuple[str | None, str]] = {}
    parents: list[str] = []
    for line in doc.splitlines():
        if (match := TREE_LINE.match(line)) is None:
            continue
        depth = len(match["indent"]) // 4 + (1 if "──" in line else 0)
        parents[depth:] = [match["name"]]
        says = match["rest"].split()
        drawn[match["name"]] = (parents[depth - 1] if depth else None, says[0] if says else "")
    return drawn


def test_errors_py_draws_every_exception_class_under_its_base() -> None:
    """The drawing in errors.py's docstring is the tree: each class of hcu.osworld once, under the class it derives
    from, and one defined elsewhere names its module."""
    import hcu.osworld.errors as errors

    drawn = drawn_tree(errors.__doc__ or "")
    classes = {cls.__name__: cls for cls in exception_classes().values()}
    assert sorted(drawn) == sorted(classes)
    for name, (parent, says) in drawn.items():
        cls = classes[name]
        bases = [base.__name__ for base in cls.__bases__ if issubclass(base, (HcuOSWorldError, AttemptEnded))]
        assert bases == ([parent] if parent else []), name
        if cls.__module__ != errors.__name__:
            assert says.rstrip(":") == cls.__module__.removeprefix("hcu.osworld."), name


def test_drawn_tree_reads_indentation_as_parentage() -> None:
    doc = """
    Root                 hcu.osworld.errors
    ├── A                a
    │   └── B            b.module: why
    └── C

    Other (a BaseException)
    └── D
"""
    assert drawn_tree(doc) == {"Root": (None, "hcu.osworld.errors"), "A": ("Root", "a"), "B": ("A", "b.module:"),
                               "C": ("Root", ""), "Other": (None, "(a"), "D": ("Other", "")}


def test_the_docker_engine_boundary_translates_its_errors_once() -> None:
    for raised in (docker.errors.APIError("500 Server Error: Internal Server Error"),
                   requests.ReadTimeout("UnixHTTPConnectionPool: Read timed out. (read timeout=60)")):
        with pytest.raises(DockerEngineError) as translated, engine_calls("guest g"):
            raise raised
        assert translate(translated.value, "setup").classification == "guest"
        assert str(translated.value).startswith(f"guest g: the Docker engine failed ({type(raised).__name__}: ")
        assert translated.value.__cause__ is raised
    with pytest.raises(KeyError), engine_calls("guest g"):  # anything else is not the engine's
        raise KeyError("a bug")


def test_a_stored_class_from_another_version_reads_as_a_runner_failure(tmp_path: Path) -> None:
    """Records keep reading (never "unreadable"), with the class policy_for gives them; live values are checked."""
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps({"status": "error", "failure_classification": "quota_exhausted"}))
    result = result_if_readable(path)
    assert result is not None and result.failure_classification == "runner"
    assert policy_for(result.failure_classification) == policy_for("quota_exhausted") == POLICIES["runner"]
    note = RetryNote(task_id="t", attempt=1, failure_classification="quota_exhausted", reason="", moved_at=0.0)
    assert note.failure_classification == "runner"
    assert RetryNote(task_id="t", attempt=1, failure_classification="guest", reason="", moved_at=0.0) \
        .failure_classification == "guest"
    with pytest.raises(ValidationError, match="failure_classification"):
        AgentOutcome(termination_reason="completed", failure_classification="quota_exhausted")  # type: ignore[arg-type]
