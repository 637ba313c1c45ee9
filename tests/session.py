"""Names unique to one test session, for everything that lands in shared places (containers, run ids)."""

from __future__ import annotations

import uuid

SESSION = uuid.uuid4().hex[:8]


def unique_run_id(name: str) -> str:
    """`name` tagged with this session: container names, labels and gateway scopes stay apart across sessions."""
    return f"{name}-{SESSION}"
