"""The test desktop serves the official in-guest API (OSWorld's server on port 5000): every endpoint OSWorld's
setup and evaluator code calls, with the official request and response shapes, spoken here as raw HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import requests
from waiting import wait_for, window_titles

from hcu.osworld.guest.lifecycle import Guest

pytestmark = pytest.mark.docker

TIMEOUT = (5, 60)


def post(guest: Guest, endpoint: str, **kwargs: object) -> requests.Response:
    return requests.post(guest.api_url() + endpoint, timeout=TIMEOUT, **kwargs)  # type: ignore[arg-type]


def get(guest: Guest, endpoint: str) -> requests.Response:
    return requests.get(guest.api_url() + endpoint, timeout=TIMEOUT)


def active_window(guest: Guest) -> str:
    return guest.api.execute(["xdotool", "getactivewindow", "getwindowname"]).output


@pytest.fixture
def probe_window(desktop_guest: Guest) -> Iterator[str]:
    """A terminal window with a unique title that prints its title; closed afterwards."""
    title = f"probe-{uuid.uuid4().hex[:8]}"
    desktop_guest.api.launch(["python3", "/opt/hcu/terminal.py", "--title", title, "--", "sh", "-c",
                              f"echo {title}; sleep 300"])
    wait_for(lambda: title in window_titles(desktop_guest.api), what=f"window {title}")
    yield title
    desktop_guest.api.execute(["wmctrl", "-c", title])


def test_platform_cursor_and_desktop_path(desktop_guest: Guest) -> None:
    assert get(desktop_guest, "/platform").text == "Linux"
    desktop_guest.api.execute(["xdotool", "mousemove", "321", "234"])
    assert get(desktop_guest, "/cursor_position").json() == [321, 234]
    assert post(desktop_guest, "/desktop_path").json() == {"desktop_path": "/home/user/Desktop"}


def test_accessibility_tree_lists_the_test_app(desktop_guest: Guest) -> None:
    """The app registers with AT-SPI on its own schedule after the desktop is painted: poll for it."""
    def tree() -> str | None:
        text = get(desktop_guest, "/accessibility").json()["AT"]
        return text if "HCU Test App" in text else None

    assert str(wait_for(tree, what="the test app in the accessibility tree")).startswith("<desktop-frame")


def test_list_directory(desktop_guest: Guest) -> None:
    folder = f"/home/user/ls-{uuid.uuid4().hex[:6]}"
    desktop_guest.api.upload(f"{folder}/sub/a.txt", b"a")
    desktop_guest.api.upload(f"{folder}/b.txt", b"b")
    tree = post(desktop_guest, "/list_directory", json={"path": folder}).json()["directory_tree"]
    assert tree["type"] == "directory"
    children = {child["name"]: child for child in tree["children"]}
    assert children["b.txt"] == {"type": "file", "name": "b.txt"}
    assert children["sub"]["children"] == [{"type": "file", "name": "a.txt"}]
    assert post(desktop_guest, "/list_directory", json={"path": f"{folder}/b.txt"}).status_code == 400


def test_activate_and_close_window(desktop_guest: Guest, probe_window: str) -> None:
    assert post(desktop_guest, "/setup/activate_window", json={"window_name": "HCU Test App"}).ok
    wait_for(lambda: active_window(desktop_guest) == "HCU Test App\n", what="the test app to be active")
    body = {"window_name": probe_window, "strict": True}
    assert post(desktop_guest, "/setup/activate_window", json=body).ok
    wait_for(lambda: active_window(desktop_guest) == probe_window + "\n", what="the probe to be active")
    assert post(desktop_guest, "/setup/close_window", json=body).ok
    wait_for(lambda: probe_window not in window_titles(desktop_guest.api), what="the window to close")


def test_terminal_reads_the_active_terminal(desktop_guest: Guest, probe_window: str) -> None:
    post(desktop_guest, "/setup/activate_window", json={"window_name": probe_window, "strict": True})
    wait_for(lambda: probe_window in (get(desktop_guest, "/terminal").json()["output"] or ""),
             what="the terminal's text")


def test_window_size(desktop_guest: Guest) -> None:
    api = desktop_guest.api

    def test_app_window() -> str | None:
        listing = api.execute(["wmctrl", "-l"]).output  # id, desktop, host, title
        return next((line.split()[0] for line in listing.splitlines() if line.endswith(" HCU Test App")), None)

    window_id = str(wait_for(test_app_window, timeout_sec=120, what="the test app's window"))
    wm_class = api.execute(["xprop", "-id", window_id, "WM_CLASS"]).output  # WM_CLASS(STRING) = "a", "A"
    instance = wm_class.split("=")[1].split(",")[0].strip().strip('"')
    geometry = api.execute(["xdotool", "getwindowgeometry", str(int(window_id, 16))]).output
    width, height = geometry.split("Geometry:")[1].split()[0].split("x")
    size = post(desktop_guest, "/window_size", data={"app_class_name": instance}).json()
    assert (size["width"], size["height"]) == (int(width), int(height))
    assert post(desktop_guest, "/window_size", data={"app_class_name": "no-such-window-class"}).status_code == 500


def test_open_file_waits_for_its_window(desktop_guest: Guest) -> None:
    name = f"note-{uuid.uuid4().hex[:6]}.txt"
    desktop_guest.api.upload(f"/home/user/Desktop/{name}", b"some text\n")
    assert post(desktop_guest, "/setup/open_file", json={"path": f"/home/user/Desktop/{name}"}).ok
    assert any(name in title for title in window_titles(desktop_guest.api))
    post(desktop_guest, "/setup/close_window", json={"window_name": name})
    assert post(desktop_guest, "/setup/open_file", json={"path": "/home/user/no-such-file.txt"}).status_code == 404


def test_run_python(desktop_guest: Guest) -> None:
    ok = post(desktop_guest, "/run_python",
              json={"code": "import sys; print(sys.version_info[0]); print('err', file=sys.stderr)"}).json()
    assert (ok["status"], ok["output"], ok["return_code"]) == ("success", "3\n", 0)
    failed = post(desktop_guest, "/run_python", json={"code": "raise SystemExit(4)"}).json()
    assert failed["status"] == "error" and failed["return_code"] == 4


def test_run_bash_script(desktop_guest: Guest) -> None:
    body = {"script": "pwd; echo to-stderr >&2; exit 2", "timeout": 100, "working_dir": "/tmp"}
    result = post(desktop_guest, "/run_bash_script", json=body).json()
    assert result == {"status": "error", "output": "/tmp\nto-stderr\n", "error": "", "returncode": 2}
    timed_out = post(desktop_guest, "/run_bash_script", json={"script": "sleep 5", "timeout": 1}).json()
    assert (timed_out["status"], timed_out["returncode"]) == ("error", -1)


def test_recording_records_the_screen_to_an_mp4(desktop_guest: Guest) -> None:
    """ffmpeg x11grab, as the official server runs it: start, a second start refused while it runs, end returns
    the MP4, and an end without a recording is refused."""
    started = post(desktop_guest, "/start_recording")
    assert (started.status_code, started.json()["status"]) == (200, "success"), started.text
    assert post(desktop_guest, "/start_recording").status_code == 400
    ended = post(desktop_guest, "/end_recording")
    assert ended.status_code == 200 and ended.content[4:8] == b"ftyp", ended.content[:100]
    assert post(desktop_guest, "/end_recording").status_code == 400
