"""Every test session is hermetic: its own hcu state directory (port leases, overlay registry, snapshot cache)
instead of the user's, and run ids unique to the session, so two sessions (or a session and a real run) on one
host never share a lease, a container name or a gateway scope.

Sessions run on pytest-xdist workers (`make test`: `-n auto --dist loadgroup`): the workers share the session's
state directory (set once, by the controller, before they start: they are one host's runners), and the tests that
share a module's fixtures, a Ray cluster, the QEMU stand-in or the demo's run run on one worker, in a group of
their own. The demo, run once per session, is shared across workers through a lock (demo_panel.py): the Ray
group's test that compares with it may wait for the demo group's run."""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

import docker.errors
import pytest
import requests

from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.state_dir import STATE_DIR_ENV, state_dir
from hcu.osworld.guest_state import kept
from hcu.osworld.records.identity import LABEL_MANAGED
from tests.demo_panel import demo_run  # noqa: F401  (the demo, run once per session for the tests that read it)

WORKER_ENV = "PYTEST_XDIST_WORKER"
SHARED_SCOPES = frozenset({"module", "class", "package"})
"""Fixtures of these scopes live once per module (class, package): the tests using them stay on one worker."""


def pytest_configure(config: pytest.Config) -> None:
    # Set before any test (or subprocess it starts) asks for the state directory; children and workers inherit it.
    if WORKER_ENV not in os.environ:
        os.environ[STATE_DIR_ENV] = tempfile.mkdtemp(prefix="hcu-test-state-")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session's kept final desktops (a test desktop's are images of a few hundred MB each) go with it: they
    are registered in the session's own state directory, so nothing of another run is touched."""
    if WORKER_ENV not in os.environ and (state_dir() / kept.LEDGER).exists() and _engine_answers():
        try:
            kept.remove_matching({LABEL_MANAGED: "1"}, kept_too=True)
        except HcuOSWorldError as exc:  # a guest a failed test left still uses one: the run's report comes first
            warnings.warn(f"the session's kept desktops were not all removed: {exc}", stacklevel=1)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which writes the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the evaluator venv's interpreter needs `make osworld-venv`: mark it so. Each test that
    shares something costly with others gets the group of what it shares (xdist's loadgroup keeps a group on one
    worker): one Ray cluster per session, one QEMU stand-in at a time (it emulates its CPU), the demo's run, a
    module's fixtures. The groups go first: each runs its tests one after another, so the longest chains start
    while the rest spreads over the other workers."""
    groups = {}
    for item in items:
        if "evaluator_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.osworld)
        groups[item.nodeid] = shared_group(item)
        if groups[item.nodeid] is not None:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    items.sort(key=lambda item: groups[item.nodeid] is None)


def _engine_answers() -> bool:
    """Whether a Docker engine answers (none in the fast tier: then this session kept no test desktop)."""
    try:
        with contextlib.closing(docker_client()) as client:
            return bool(client.ping())
    except (docker.errors.DockerException, requests.RequestException):
        return False


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a worker under loadgroup, every grouped test's id carries its group (what the scheduler reads): a pytest
    or xdist that loses it would run a module's fixtures on several workers at once, so stop instead."""
    if WORKER_ENV in os.environ and session.config.getvalue("loadgroup"):
        lost = [item.nodeid for item in session.items
                if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
        if lost:
            raise pytest.UsageError(f"xdist did not group {len(lost)} tests (first: {lost[0]}): check the versions "
                                    "of pytest and pytest-xdist against pyproject.toml's pins")


def shared_group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("ray") is not None:
        return "ray"
    if item.get_closest_marker("kvm") is not None:
        return "qemu"
    if "demo_run" in getattr(item, "fixturenames", ()):
        return "demo"
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return None
    scopes = {defs[-1].scope for defs in definitions.name2fixturedefs.values() if defs}
    return item.nodeid.split("::", 1)[0] if scopes & SHARED_SCOPES else None
