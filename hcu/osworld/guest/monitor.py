"""QEMU's machine monitor (QMP) on a guest's control socket: the official `qemu.qmp` client behind a synchronous
call, each under a timeout, its errors translated once into `MonitorError`.

A QEMU guest's runner is started with `-qmp unix:<control dir>/qmp.sock` (kinds.QemuGuest), the control dir a
host folder bind-mounted into its container, so hcu talks to QEMU directly without `docker exec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qemu.qmp import QMPClient, QMPError

from hcu.osworld.errors import GuestError

SOCKET_NAME = "qmp.sock"
CALL_TIMEOUT_SEC = 30.0
POLL_INTERVAL_SEC = 0.1


class MonitorError(GuestError):
    """The guest's QEMU monitor refused a command, did not answer in time, or was never there."""


class Monitor:
    """One QMP connection, used from one thread; `with Monitor.connect(...) as qmp: qmp.execute("stop")`."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._loop = asyncio.new_event_loop()
        self._client = QMPClient(f"hcu {socket.parent.name}")
        self.version: str | None = None
        """QEMU's version from the monitor's greeting (`7.2.22`)."""

    @classmethod
    def connect(cls, socket: Path, *, within_sec: float) -> Monitor:
        """Connect, waiting up to `within_sec` for QEMU to open its socket."""
        monitor = cls(socket)
        deadline = time.monotonic() + within_sec
        last = "no socket yet"
        while True:
            try:
                monitor._run(monitor._client.connect(str(socket)), CALL_TIMEOUT_SEC, "connect")
                break
            except MonitorError as exc:
                last = str(exc)
            if time.monotonic() + POLL_INTERVAL_SEC > deadline:
                monitor.close()
                raise MonitorError(f"QEMU monitor {socket}: not reachable within {within_sec:g} s ({last})")
            time.sleep(POLL_INTERVAL_SEC)
        greeting = monitor._client.greeting
        if greeting is not None:
            qemu = greeting.QMP.version["qemu"]
            monitor.version = f"{qemu['major']}.{qemu['minor']}.{qemu['micro']}"
        return monitor

    def execute(self, command: str, arguments: Mapping[str, object] | None = None, *,
                timeout_sec: float = CALL_TIMEOUT_SEC) -> Any:
        return self._run(self._client.execute(command, arguments), timeout_sec, command)

    def wait_for(self, command: str, done: Any, *, timeout_sec: float, what: str) -> Any:
        """Ask `command` until `done(answer)` holds; its last answer."""
        deadline = time.monotonic() + timeout_sec
        while True:
            answer = self.execute(command)
            if done(answer):
                return answer
            if time.monotonic() + POLL_INTERVAL_SEC > deadline:
                raise MonitorError(f"QEMU monitor: {what} not done within {timeout_sec:g} s (last: {answer})")
            time.sleep(POLL_INTERVAL_SEC)

    def quit(self) -> None:
        """End QEMU (its container exits with it); the connection closes with it."""
        with contextlib.suppress(MonitorError):
            self.execute("quit")

    def close(self) -> None:
        with contextlib.suppress(MonitorError, EOFError, OSError):
            self._run(self._client.disconnect(), CALL_TIMEOUT_SEC, "disconnect")
        left = asyncio.all_tasks(self._loop)  # a connection QEMU dropped leaves the client's own tasks behind
        for task in left:
            task.cancel()
        if left:
            self._loop.run_until_complete(asyncio.wait(left))
        self._loop.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: Any, timeout_sec: float, what: str) -> Any:
        try:
            return self._loop.run_until_complete(asyncio.wait_for(call, timeout_sec))
        except asyncio.TimeoutError:
            raise MonitorError(f"QEMU monitor: {what} did not answer within {timeout_sec:g} s") from None
        except (QMPError, OSError, EOFError) as exc:
            raise MonitorError(f"QEMU monitor: {what} failed: {exc or type(exc).__name__}") from None


def socket_in(control_dir: Path) -> Path:
    return control_dir / SOCKET_NAME
