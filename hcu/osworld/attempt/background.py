"""Work an attempt starts now and needs later, on a daemon thread: a `Future` whose `result()` waits for it and
raises what it raised. The phase that needs it waits in its own thread, so the phase's deadline and a stop signal
still end that wait."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def in_background(work: Callable[[], T], name: str) -> Future[T]:
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to whoever waits for it
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
