"""Polling helpers for guest tests: wait for a condition in the guest, list its windows."""

from __future__ import annotations

import time
from collections.abc import Callable

from hcu.osworld.guest.api import GuestAPI


def wait_for(predicate: Callable[[], object], timeout_sec: float = 20.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def window_titles(api: GuestAPI) -> list[str]:
    listing = api.execute(["wmctrl", "-l"]).output
    return [line.split(None, 3)[3] for line in listing.splitlines() if len(line.split(None, 3)) == 4]
