"""Which of OSWorld's getters read nothing of the guest's state, inside the OSWorld process.

A getter that fails rarely raises: `vm_file` returns None after a 404, Chrome's preference getters return a
default ("false") after a failed fetch and a parse error on the empty answer, and `DesktopEnv.evaluate` turns
a FileNotFoundError into a 0. Each getter call is wrapped (the function itself is OSWorld's and runs
unchanged): what it returned, the guest requests it made that were not answered with a success, and the
errors OSWorld logged meanwhile. A getter with any of these "read nothing"; hcu records it by name.
"""

from __future__ import annotations

import logging
from typing import Any

from hcu.osworld.osworld_bridge.child.guest_traffic import Watch, failures
from hcu.osworld.osworld_bridge.protocol import one_line

OSWORLD_LOGGER = "desktopenv"
"""The parent of every logger OSWorld's controllers, getters and metrics log to."""
REASONS_KEPT = 3


class _ErrorsLogged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(one_line(record.getMessage())[:300])
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is still an error logged
            self.messages.append(f"{record.name}: (unformattable message)")


class GetterCall:
    """Wraps one resolved getter; `calls` receives one record per call."""

    def __init__(self, fn: Any, label: str, watch: Watch, calls: list[dict[str, Any]]) -> None:
        self.fn, self.label, self.watch, self.calls = fn, label, watch, calls
        self.__name__ = label

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        errors = _ErrorsLogged()
        logger = logging.getLogger(OSWORLD_LOGGER)
        logger.addHandler(errors)
        mark = self.watch.mark()
        reasons: list[str] = []
        try:
            value = self.fn(*args, **kwargs)
        except FileNotFoundError as exc:
            reasons.append(f"raised FileNotFoundError: {one_line(str(exc))[:200]}")
            raise
        else:
            reasons += _empty(value)
            return value
        finally:
            logger.removeHandler(errors)
            reasons += [f"guest: {e.line()}" for e in failures(self.watch.since(mark), skip_probe=False)]
            reasons += [f"logged: {m}" for m in errors.messages]
            reasons = list(dict.fromkeys(reasons))  # OSWorld retries a fetch: the same line, several times
            self.calls.append({"getter": self.label, "read_nothing": bool(reasons),
                               "reasons": reasons[:REASONS_KEPT]})


def _empty(value: Any) -> list[str]:
    if value is None:
        return ["returned None"]
    if isinstance(value, list) and any(item is None for item in value):
        return [f"returned None for item {value.index(None)}"]
    return []


def wrap_getters(resolved: Any, watch: Watch, calls: list[dict[str, Any]]) -> Any:
    """The env's resolved getter (or list of them) with every function wrapped."""
    if isinstance(resolved, list):
        return [wrap_getters(fn, watch, calls) for fn in resolved]
    if resolved is None:
        return None
    name = getattr(resolved, "__name__", "?")
    return GetterCall(resolved, name.removeprefix("get_"), watch, calls)


def read_nothing(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per getter that read nothing: {"getter": name, "reason": first reason} (first call wins)."""
    found: dict[str, str] = {}
    for call in calls:
        if call["read_nothing"] and call["getter"] not in found:
            found[call["getter"]] = "; ".join(call["reasons"])
    return [{"getter": name, "reason": reason} for name, reason in found.items()]
