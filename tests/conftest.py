"""Every test session is hermetic: its own hcu state directory (port leases, overlay registry) instead of the
user's, and run ids unique to the session, so two sessions (or a session and a real run) on one host never
share a lease, a container name or a gateway scope."""

from __future__ import annotations

import os
import tempfile

import pytest

from hcu.osworld.guest.state_dir import STATE_DIR_ENV
from tests.demo_panel import demo_run  # noqa: F401  (the demo, run once per session for the tests that read it)


def pytest_configure(config: pytest.Config) -> None:
    # Set before any test (or subprocess it starts) asks for the state directory; children inherit it.
    os.environ[STATE_DIR_ENV] = tempfile.mkdtemp(prefix="hcu-test-state-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the evaluator venv's interpreter needs `make osworld-venv`: mark it so."""
    for item in items:
        if "evaluator_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.osworld)
