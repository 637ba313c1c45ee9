"""What the guest answered to OSWorld's own requests, seen inside the OSWorld process.

OSWorld's SetupController only logs a guest answer that is not a success for most step types (`launch`,
`execute`, `activate_window`, ...), and its getters turn a failed fetch into None or a default value. Every
`requests` call OSWorld makes goes through `requests.Session.send`; while a `Watch` is on, each exchange with
the guest's address is kept (method, path, HTTP status or the transport error, the guest's message, an
execute's return code), so hcu can fail the step or name the getter. OSWorld's code runs unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hcu.osworld.guest.answer import answer_message

PROBE = ("GET", "/terminal")
"""SetupController.setup's reachability probe: OSWorld retries it itself and ignores its answer by design."""


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    status: int | None
    """HTTP status; None when no answer came back (connection refused, timeout)."""
    ok: bool
    """A 2xx answer that does not say `"status": "error"`."""
    message: str = ""
    """The guest's message for a failure, or the transport error."""
    returncode: int | None = None
    """An `/execute` answer's exit status (a command that ran and exited non-zero is still an answer)."""
    file: str | None = None
    """The guest path a `/file` request asked for (its form field; never a command, which may hold the
    password)."""

    def line(self) -> str:
        """`POST /setup/launch -> HTTP 500: [Errno 2] No such file or directory: 'code'`"""
        answer = "no answer" if self.status is None else f"HTTP {self.status}"
        target = f" ({self.file})" if self.file else ""
        return f"{self.method} {self.path}{target} -> {answer}" + (f": {self.message}" if self.message else "")

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "") or k == "status"}


class Watch:
    """Keeps every exchange with `host` while on (one watch at a time: OSWorld's calls run one by one)."""

    def __init__(self, host: str, secret: str) -> None:
        self.host, self.secret = host, secret
        self.exchanges: list[Exchange] = []

    @contextlib.contextmanager
    def on(self) -> Iterator[None]:
        import requests

        original = requests.Session.send
        watch = self

        def send(session: Any, request: Any, **kwargs: Any) -> Any:
            if urlsplit(request.url).hostname != watch.host:
                return original(session, request, **kwargs)
            try:
                response = original(session, request, **kwargs)
            except requests.RequestException as exc:
                watch.exchanges.append(watch._exchange(request, None, f"{type(exc).__name__}: {exc}"))
                raise
            watch.exchanges.append(watch._exchange(request, response, readable=not kwargs.get("stream")))
            return response

        requests.Session.send = send
        try:
            yield
        finally:
            requests.Session.send = original

    def mark(self) -> int:
        return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        return self.exchanges[mark:]

    def _exchange(self, request: Any, response: Any, error: str = "", readable: bool = True) -> Exchange:
        """`readable`: the body may be read here (not a streamed answer the caller still has to consume)."""
        method, path = request.method or "?", urlsplit(request.url).path
        file = _form_field(request, "file_path") if path == "/file" else None
        if response is None:
            return Exchange(method, path, None, False, answer_message(error, self.secret), file=file)
        small = readable and int(response.headers.get("Content-Length") or 0) < 1_000_000
        body = _json(response.text) if small and "json" in response.headers.get("Content-Type", "") else None
        returncode = body.get("returncode") if isinstance(body, dict) else None
        ok = 200 <= response.status_code < 300 and not (isinstance(body, dict) and body.get("status") == "error")
        message = "" if ok or not small else answer_message(response.text, self.secret)
        return Exchange(method, path, response.status_code, ok, message,
                        returncode if isinstance(returncode, int) else None, file)


def failures(exchanges: list[Exchange], *, skip_probe: bool) -> list[Exchange]:
    """The exchanges whose answer was not a success (the setup probe left out when asked)."""
    return [e for e in exchanges if not e.ok and not (skip_probe and (e.method, e.path) == PROBE)]


def _json(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return None


def _form_field(request: Any, name: str) -> str | None:
    body = request.body
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if not isinstance(body, str) or "=" not in body:
        return None
    values = parse_qs(body).get(name)
    return values[0] if values else None
