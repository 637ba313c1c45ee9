"""The in-guest API client against a running test desktop: every endpoint it wraps, and its retry policy."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest
from docker.models.containers import Container
from tenacity import Retrying, stop_after_attempt, wait_fixed
from waiting import wait_for

from hcu.osworld.guest.api import ExecResult, GuestAPI, GuestAPIError
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import Guest


@pytest.mark.docker
def test_screenshot_and_screen_size(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    assert api.screenshot().startswith(b"\x89PNG\r\n\x1a\n")
    assert api.screen_size() == (1920, 1080)


@pytest.mark.docker
def test_upload_then_file_roundtrip_with_parent_creation(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    data = bytes(range(256)) * 40
    path = f"/home/user/up-{uuid.uuid4().hex[:6]}/nested/blob.bin"
    api.upload(path, data)
    assert api.file(path) == data
    with pytest.raises(FileNotFoundError):
        api.file(path + ".missing")


@pytest.mark.docker
def test_execute_list_string_shell_and_failures(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    assert api.execute(["echo", "hello world"]) == ExecResult(
        status="success", output="hello world\n", error="", returncode=0
    )
    assert api.execute("printf '%s|' 'a b' c").output == "a b|c|"  # shlex-split without a shell
    assert api.execute("echo one | tr a-z A-Z", shell=True).output == "ONE\n"
    failed = api.execute(["sh", "-c", "echo oops >&2; exit 3"])
    assert (failed.status, failed.error, failed.returncode) == ("success", "oops\n", 3)
    missing = api.execute(["no-such-program-hcu"])
    assert missing.status == "error" and missing.returncode is None and "no-such-program-hcu" in missing.error
    assert api.execute(["whoami"]).output == "user\n"


@pytest.mark.docker
def test_launch_does_not_wait(desktop_guest: Guest) -> None:
    """The launched process waits for a file created only after launch() returned: a launch that waited for
    its process would never return."""
    api = desktop_guest.api
    marker = f"/tmp/launched-{uuid.uuid4().hex[:6]}"
    api.launch(["sh", "-c", f"while [ ! -e {marker}.go ]; do sleep 0.1; done; touch {marker}"])
    api.execute(["touch", f"{marker}.go"])
    wait_for(lambda: api.execute(["test", "-e", marker]).returncode == 0, what="the launched process")
    api.launch(f"touch {marker}-shell && true", shell=True)
    wait_for(lambda: api.execute(["test", "-e", f"{marker}-shell"]).returncode == 0, what="shell launch")


def pause_with_retries(container: Container) -> None:
    """The cgroup freezer sometimes fails under load ("unable to freeze"); it succeeds on a later try."""
    for attempt in Retrying(stop=stop_after_attempt(5), wait=wait_fixed(0.5), reraise=True):
        with attempt:
            container.pause()


@contextlib.contextmanager
def paused(guest: Guest, unpause_after_sec: float | None = None) -> Iterator[None]:
    """Freeze the guest's container (connections are accepted, nothing answers); thaw it after
    `unpause_after_sec`, or when the block ends."""
    with contextlib.closing(docker_client()) as client:
        container = client.containers.get(guest.container_id)
        pause_with_retries(container)
        thaw = threading.Timer(unpause_after_sec or 0.0, container.unpause)
        if unpause_after_sec is not None:
            thaw.start()
        try:
            yield
        finally:
            if unpause_after_sec is None:
                container.unpause()
            else:
                thaw.join()


@pytest.mark.docker
def test_execute_that_may_have_run_is_not_retried(desktop_guest: Guest) -> None:
    """The request reaches a frozen guest and times out; when the guest thaws, the command runs once."""
    api = desktop_guest.api
    log = f"/tmp/append-{uuid.uuid4().hex[:6]}"
    with paused(desktop_guest), pytest.raises(GuestAPIError) as timed_out:
        api.execute(["sh", "-c", f"echo ran >> {log}"], timeout_sec=0.5)
    assert timed_out.value.status is None and "timed out" in str(timed_out.value)
    wait_for(lambda: api.execute(["test", "-e", log]).returncode == 0, what="the delayed command")
    wait_for(lambda: not api_connections(desktop_guest), what="the guest done with every request it got")
    assert api.file(log) == b"ran\n", "a retry would have run it again"


def api_connections(guest: Guest) -> list[str]:
    """The guest API's open TCP connections (read through Docker, so the check opens none): a request the
    client sent, retried or not, keeps one open until the guest has answered it."""
    port = f":{5000:04X} "
    with contextlib.closing(docker_client()) as client:
        listing = client.containers.get(guest.container_id).exec_run(["cat", "/proc/net/tcp", "/proc/net/tcp6"])
    return [line for line in listing.output.decode().splitlines()[1:]
            if port in line.split(None, 3)[1] + " " and line.split()[3] == "01"]  # 01: ESTABLISHED


@pytest.mark.docker
def test_read_is_retried_through_a_short_freeze(desktop_guest: Guest) -> None:
    api = GuestAPI(desktop_guest.api_url(), timeout_sec=1.0)
    with paused(desktop_guest, unpause_after_sec=1.5):
        assert api.screenshot().startswith(b"\x89PNG")


def test_nothing_listening_is_a_guest_api_error_for_reads_and_commands() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        api = GuestAPI(f"http://127.0.0.1:{sock.getsockname()[1]}", timeout_sec=2)
    for call in (api.screenshot, lambda: api.execute(["true"]), lambda: api.upload("/tmp/x", b"x")):
        with pytest.raises(GuestAPIError) as failed:
            call()
        assert failed.value.status is None and "no answer (ConnectionError)" in str(failed.value)
