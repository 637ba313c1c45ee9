"""Typed client for the in-guest HTTP API on port 5000 (the official OSWorld server, or the test desktop's).

Request and response shapes follow the official server. Only the endpoints hcu itself calls are wrapped
(OSWorld's own setup and evaluator code calls the rest); tests/guest/test_desktop_api_contract.py checks the
test desktop serves every endpoint the official server has. One `_request()` applies the timeout, the retry
policy and the error mapping; every endpoint is a one-liner over it.

Retry policy (its limits: `hcu.defaults.RETRIES.guest_api`): a read may be retried on a transient failure
(connection error, timeout, 502/503/504). A command that might have run (execute, launch, upload) is retried
only when the request provably never left this host (connection refused, connect timeout); once it may have
reached the guest, a failure is raised as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests
from pydantic import BaseModel, ValidationError
from urllib3.exceptions import NewConnectionError

from hcu.defaults import RETRIES, Backoff
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest.answer import answer_message
from hcu.record_io import write_atomic_chunks

CONNECT_TIMEOUT_SEC = 5.0
UPLOAD_MIN_BYTES_PER_SEC = 2_000_000
"""The slowest upload rate tolerated before an upload counts as stalled (a busy guest writes ~100 MB/s)."""
SERVER_MARGIN_SEC = 10.0
"""Added to a guest-side timeout (execute, run_bash_script) so the guest's own timeout answer comes first."""
TRANSIENT_STATUSES = frozenset({502, 503, 504})
CHUNK_BYTES = 1 << 20
RECORDING_STOP_SEC = 60.0
"""The guest waits up to 15 s for ffmpeg to finish the MP4 before it answers /end_recording."""


class ExecResult(BaseModel):
    """What `/execute` and `/run_bash_script` report; `returncode` None: the guest could not start it."""

    status: str
    output: str
    error: str
    returncode: int | None


class GuestAPIError(HcuOSWorldError):
    """A call into the guest failed. Carries the endpoint and HTTP status (None when no response came back).

    The message names the endpoint, the status or the transport failure and what the guest answered (one line,
    the client password masked), never request bodies (which can hold the guest's sudo password)."""

    def __init__(self, endpoint: str, status: int | None, reason: str) -> None:
        super().__init__(f"guest API {endpoint}: {reason}")
        self.endpoint = endpoint
        self.status = status


class _TransientStatus(HcuOSWorldError):
    def __init__(self, response: requests.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _never_sent(exc: BaseException) -> bool:
    """True when the request cannot have reached the guest: nothing was connected."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if isinstance(exc, requests.ConnectionError) and exc.args:
        return isinstance(getattr(exc.args[0], "reason", None), NewConnectionError)
    return False


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, (requests.ConnectionError, requests.Timeout, _TransientStatus))


class GuestAPI:
    """Client for one guest's API at `base_url` (e.g. `http://172.17.0.1:20000`)."""

    def __init__(self, base_url: str, *, timeout_sec: float = 30.0, secret: str = "",
                 backoff: Backoff = RETRIES.guest_api) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_sec = timeout_sec
        self.secret = secret
        """Masked wherever a guest's answer reaches an error message (the client password)."""
        self.backoff = backoff

    def __repr__(self) -> str:
        return f"GuestAPI({self.base_url!r})"

    def _request(
        self,
        method: str,
        endpoint: str,
        *,
        command: bool,
        timeout_sec: float | None = None,
        send_timeout_sec: float = CONNECT_TIMEOUT_SEC,
        ok_statuses: frozenset[int] = frozenset({200}),
        **kwargs: Any,
    ) -> requests.Response:
        """Send one request under the retry policy; return a response whose status is in `ok_statuses`.

        urllib3 applies the first timeout to connecting *and* to sending the body, so a large upload to a busy
        guest needs a send timeout sized to the body (`send_timeout_sec`)."""
        timeout = (send_timeout_sec, timeout_sec or self.timeout_sec)
        retrying = self.backoff.retrying(_never_sent if command else _transient)
        try:
            response = retrying(self._send, method, endpoint, timeout, command, **kwargs)
        except _TransientStatus as exc:
            response = exc.response
        except requests.Timeout as exc:
            raise GuestAPIError(endpoint, None, f"timed out ({type(exc).__name__})") from None
        except requests.RequestException as exc:
            raise GuestAPIError(endpoint, None, f"no answer ({type(exc).__name__})") from None
        if response.status_code not in ok_statuses:
            message = answer_message(response.text, self.secret)
            raise GuestAPIError(endpoint, response.status_code,
                                f"HTTP {response.status_code}" + (f": {message}" if message else ""))
        return response

    def _send(
        self, method: str, endpoint: str, timeout: tuple[float, float], command: bool, **kwargs: Any
    ) -> requests.Response:
        response = requests.request(method, self.base_url + endpoint, timeout=timeout, **kwargs)
        if not command and response.status_code in TRANSIENT_STATUSES:
            raise _TransientStatus(response)
        return response

    def _json(self, method: str, endpoint: str, **kwargs: Any) -> Any:
        response = self._request(method, endpoint, command=False, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise GuestAPIError(endpoint, response.status_code, "answer is not JSON") from None

    # Reads -------------------------------------------------------------------------------------------

    def screenshot(self) -> bytes:
        return self._request("GET", "/screenshot", command=False).content

    def file(self, guest_path: str, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes; FileNotFoundError when the guest has no such file. With `max_bytes`, a larger
        answer is a GuestAPIError (read no further than that: the guest is not trusted with host memory)."""
        response = self._request("POST", "/file", command=False, data={"file_path": guest_path},
                                 ok_statuses=frozenset({200, 404}), stream=max_bytes is not None)
        if response.status_code == 404:
            response.close()
            raise FileNotFoundError(guest_path)
        if max_bytes is None:
            return response.content
        return b"".join(_bounded(response, "/file", max_bytes))

    def screen_size(self) -> tuple[int, int]:
        size = self._json("POST", "/screen_size")
        return int(size["width"]), int(size["height"])

    # Commands: never retried once they may have reached the guest ----------------------------------------

    def execute(
        self, command: list[str] | str, *, shell: bool = False, timeout_sec: float = 120
    ) -> ExecResult:
        """Run a command and wait for it (the guest stops it after 120 s). A command the guest could not start
        (500) comes back with `status="error"`, the guest's message in `error` and `returncode=None`."""
        response = self._request(
            "POST",
            "/execute",
            command=True,
            timeout_sec=timeout_sec + SERVER_MARGIN_SEC,
            json={"command": command, "shell": shell},
            ok_statuses=frozenset({200, 500}),
        )
        body = _json_body(response, "/execute")
        if response.status_code == 500:
            return ExecResult(status="error", output="", error=str(body.get("message", "")), returncode=None)
        return _exec_result(body, "/execute", response.status_code)

    def launch(self, command: list[str] | str, *, shell: bool = False) -> None:
        self._request("POST", "/setup/launch", command=True, json={"command": command, "shell": shell})

    def start_recording(self) -> None:
        """Start the guest's screen recording (ffmpeg x11grab); the guest refuses a second one (400)."""
        self._request("POST", "/start_recording", command=True)

    def end_recording(self, dest: Path, *, max_bytes: int) -> int:
        """Stop the recording and write the guest's MP4 to `dest` (atomically); returns its size. An answer
        over `max_bytes` is a GuestAPIError and leaves nothing at `dest`."""
        response = self._request("POST", "/end_recording", command=True, timeout_sec=RECORDING_STOP_SEC,
                                 stream=True)
        return write_atomic_chunks(dest, _bounded(response, "/end_recording", max_bytes))

    def upload(self, guest_path: str, data: bytes) -> None:
        """Write `data` to `guest_path` (the guest creates parent directories)."""
        self._request(
            "POST",
            "/setup/upload",
            command=True,
            send_timeout_sec=max(CONNECT_TIMEOUT_SEC, len(data) / UPLOAD_MIN_BYTES_PER_SEC),
            timeout_sec=max(self.timeout_sec, len(data) / UPLOAD_MIN_BYTES_PER_SEC),
            data={"file_path": guest_path},
            files={"file_data": ("file", data)},
        )


def _bounded(response: requests.Response, endpoint: str, max_bytes: int) -> Iterator[bytes]:
    """A streamed answer's body, failing once it grows past `max_bytes`."""
    read = 0
    with response:
        try:
            for chunk in response.iter_content(CHUNK_BYTES):
                read += len(chunk)
                if read > max_bytes:
                    raise GuestAPIError(endpoint, response.status_code, f"answer larger than {max_bytes} bytes")
                yield chunk
        except requests.RequestException as exc:
            raise GuestAPIError(endpoint, response.status_code, f"answer cut off ({type(exc).__name__})") from None


def _json_body(response: requests.Response, endpoint: str) -> dict:
    """The JSON object in a response; an HTML error page (a crashed handler) is a GuestAPIError."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise GuestAPIError(
            endpoint, response.status_code, f"HTTP {response.status_code}, answer is not JSON"
        )
    return body


def _exec_result(body: dict, endpoint: str, status: int) -> ExecResult:
    try:
        return ExecResult.model_validate(body)
    except ValidationError:
        raise GuestAPIError(endpoint, status, f"HTTP {status}, not a command result") from None
