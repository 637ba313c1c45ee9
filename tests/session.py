"""Names unique to one test session, for everything that lands in shared places (containers, run ids)."""

from __future__ import annotations

import os
import uuid

from hcu.defaults import GUEST

SESSION = uuid.uuid4().hex[:8]
TEST_DESKTOP_IMAGE = os.environ.get("HCU_TEST_DESKTOP_IMAGE", GUEST.test_desktop_image)
"""The test desktop image the Docker tests run on (`HCU_TEST_DESKTOP_IMAGE` names another tag, e.g. while one is
being rebuilt)."""


def unique_run_id(name: str) -> str:
    """`name` tagged with this session: container names, labels and gateway scopes stay apart across sessions."""
    return f"{name}-{SESSION}"
