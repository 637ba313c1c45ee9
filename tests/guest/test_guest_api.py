"""Every in-guest API endpoint the client wraps, against a running test desktop; and the retry policy."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from docker.models.containers import Container
from tenacity import Retrying, stop_after_attempt, wait_fixed

from hcu.osworld.guest.api import ExecResult, GuestAPI, GuestAPIError
from hcu.osworld.guest.docker_engine import docker_client
from hcu.osworld.guest.lifecycle import Guest


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


@pytest.fixture
def probe_window(desktop_guest: Guest) -> Iterator[str]:
    """A terminal window with a unique title that prints a marker; closed afterwards."""
    title = f"probe-{uuid.uuid4().hex[:8]}"
    command = [
        "python3",
        "/opt/hcu/terminal.py",
        "--title",
        title,
        "--",
        "sh",
        "-c",
        f"echo {title}; sleep 300",
    ]
    desktop_guest.api.launch(command)
    wait_for(lambda: title in window_titles(desktop_guest.api), what=f"window {title}")
    yield title
    desktop_guest.api.execute(["wmctrl", "-c", title])


@pytest.mark.docker
def test_screenshot_platform_and_sizes(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    assert api.screenshot().startswith(b"\x89PNG\r\n\x1a\n")
    assert api.platform() == "Linux"
    assert api.screen_size() == (1920, 1080)
    x, y = api.cursor_position()
    assert 0 <= x < 1920 and 0 <= y < 1080
    assert api.desktop_path() == "/home/user/Desktop"


@pytest.mark.docker
def test_cursor_position_follows_the_pointer(desktop_guest: Guest) -> None:
    desktop_guest.api.execute(["xdotool", "mousemove", "321", "234"])
    assert desktop_guest.api.cursor_position() == (321, 234)


@pytest.mark.docker
def test_accessibility_tree_lists_the_test_app(desktop_guest: Guest) -> None:
    tree = desktop_guest.api.accessibility()
    assert tree.startswith("<desktop-frame")
    assert "HCU Test App" in tree


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
def test_list_directory(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    folder = f"/home/user/ls-{uuid.uuid4().hex[:6]}"
    api.upload(f"{folder}/sub/a.txt", b"a")
    api.upload(f"{folder}/b.txt", b"b")
    tree = api.list_directory(folder)
    assert tree["type"] == "directory"
    children = {child["name"]: child for child in tree["children"]}
    assert children["b.txt"] == {"type": "file", "name": "b.txt"}
    assert children["sub"]["children"] == [{"type": "file", "name": "a.txt"}]
    with pytest.raises(NotADirectoryError):
        api.list_directory(f"{folder}/b.txt")


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
    api = desktop_guest.api
    marker = f"/tmp/launched-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    api.launch(["sh", "-c", f"sleep 1; touch {marker}"])
    assert time.monotonic() - started < 1.0, "launch waited for the process"
    wait_for(lambda: api.execute(["test", "-e", marker]).returncode == 0, what="the launched process")
    api.launch(f"touch {marker}-shell && true", shell=True)
    wait_for(lambda: api.execute(["test", "-e", f"{marker}-shell"]).returncode == 0, what="shell launch")


@pytest.mark.docker
def test_activate_and_close_window(desktop_guest: Guest, probe_window: str) -> None:
    api = desktop_guest.api
    api.activate_window("HCU Test App")
    wait_for(lambda: api.execute(["xdotool", "getactivewindow", "getwindowname"]).output == "HCU Test App\n")
    api.activate_window(probe_window, strict=True)
    wait_for(
        lambda: api.execute(["xdotool", "getactivewindow", "getwindowname"]).output == probe_window + "\n"
    )
    api.close_window(probe_window, strict=True)
    wait_for(lambda: probe_window not in window_titles(api), what="the window to close")


@pytest.mark.docker
def test_terminal_reads_the_active_terminal(desktop_guest: Guest, probe_window: str) -> None:
    api = desktop_guest.api
    api.activate_window(probe_window, strict=True)
    text = wait_for(lambda: (api.terminal() or "") if probe_window in (api.terminal() or "") else None)
    assert probe_window in str(text)


@pytest.mark.docker
def test_window_size(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    listing = api.execute(["wmctrl", "-l"]).output  # id, desktop, host, title
    window_id = next(
        (line.split()[0] for line in listing.splitlines() if line.endswith(" HCU Test App")), None
    )
    assert window_id, f"the test app has no window: {listing!r}"
    wm_class = api.execute(["xprop", "-id", window_id, "WM_CLASS"]).output  # WM_CLASS(STRING) = "a", "A"
    instance = wm_class.split("=")[1].split(",")[0].strip().strip('"')
    geometry = api.execute(["xdotool", "getwindowgeometry", str(int(window_id, 16))]).output
    width, height = geometry.split("Geometry:")[1].split()[0].split("x")
    assert api.window_size(instance) == (int(width), int(height))
    assert api.window_size("no-such-window-class") is None


@pytest.mark.docker
def test_open_file_waits_for_its_window(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    name = f"note-{uuid.uuid4().hex[:6]}.txt"
    api.upload(f"/home/user/Desktop/{name}", b"some text\n")
    api.open_file(f"/home/user/Desktop/{name}", timeout_sec=60)
    assert any(name in title for title in window_titles(api))
    api.close_window(name)
    with pytest.raises(FileNotFoundError):
        api.open_file("/home/user/no-such-file.txt", timeout_sec=30)


@pytest.mark.docker
def test_run_python(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    ok = api.run_python("import sys; print(sys.version_info[0]); print('err', file=sys.stderr)")
    assert (ok["status"], ok["output"], ok["return_code"]) == ("success", "3\n", 0)
    failed = api.run_python("raise SystemExit(4)")
    assert failed["status"] == "error" and failed["return_code"] == 4


@pytest.mark.docker
def test_run_bash_script(desktop_guest: Guest) -> None:
    api = desktop_guest.api
    result = api.run_bash_script("pwd; echo to-stderr >&2; exit 2", working_dir="/tmp")
    assert result == ExecResult(status="error", output="/tmp\nto-stderr\n", error="", returncode=2)
    timed_out = api.run_bash_script("sleep 5", timeout_sec=1)
    assert (timed_out.status, timed_out.returncode) == ("error", -1)


@pytest.mark.docker
def test_recording_fails_loudly_without_ffmpeg(desktop_guest: Guest) -> None:
    """The test desktop has no ffmpeg: both calls surface the guest's error instead of returning nothing."""
    with pytest.raises(GuestAPIError) as started:
        desktop_guest.api.start_recording()
    assert (started.value.endpoint, started.value.status) == ("/start_recording", 500)
    with pytest.raises(GuestAPIError) as ended:
        desktop_guest.api.end_recording()
    assert ended.value.status == 400


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
    time.sleep(2)  # a duplicate would have landed by now
    assert api.file(log) == b"ran\n"


@pytest.mark.docker
def test_read_is_retried_through_a_short_freeze(desktop_guest: Guest) -> None:
    api = GuestAPI(desktop_guest.api_url(), timeout_sec=1.0)
    with paused(desktop_guest, unpause_after_sec=1.5):
        assert api.platform() == "Linux"


def test_nothing_listening_is_a_guest_api_error_for_reads_and_commands() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        api = GuestAPI(f"http://127.0.0.1:{sock.getsockname()[1]}", timeout_sec=2)
    for call in (api.screenshot, lambda: api.execute(["true"]), lambda: api.run_bash_script("true")):
        with pytest.raises(GuestAPIError) as failed:
            call()
        assert failed.value.status is None and "no answer (ConnectionError)" in str(failed.value)
