"""The official guest's applications on the test desktop: each is launched by an official task's own setup
steps (replayed through the in-guest API) and checked to be really there — its window, and for Chrome and
VLC the endpoint OSWorld's setup and getters use, reached on the host port hcu leased for the guest.

One guest for the module; each test ends its application the way the tasks do (`pkill ...`)."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable

import pytest
import requests
from task_setup import replay_setup
from waiting import wait_for, window_titles
from websockets.sync.client import ClientConnection, connect

from hcu.osworld.guest.lifecycle import Guest
from tests.official_tasks import official_task

pytestmark = pytest.mark.docker

APP_START_S = 180.0
"""A first start under load (two cores shared with other guests); the checks poll, so a fast start is fast."""
HTTP_TIMEOUT = (5, 30)
VLC_PASSWORD = "password"
"""The password OSWorld's VLC getters send, as the official guest configures VLC."""


def wait_for_window(guest: Guest, matches: Callable[[str], bool], what: str) -> str:
    """The first window title that `matches`, polled until it appears."""
    def found() -> str | None:
        return next((title for title in window_titles(guest.api) if matches(title)), None)

    return str(wait_for(found, APP_START_S, f"a window of {what} (windows: {window_titles(guest.api)})"))


def end_app(guest: Guest, pkill_pattern: str) -> None:
    """End an application as the tasks do, and wait until none of its processes is left."""
    guest.api.execute(["pkill", pkill_pattern])
    wait_for(lambda: guest.api.execute(["pgrep", pkill_pattern]).returncode == 1, 60, f"{pkill_pattern} to end")


def test_chrome_serves_cdp_on_the_leased_port_through_the_tasks_socat_bridge(desktop_guest: Guest) -> None:
    """chrome/030eeff7: `google-chrome --remote-debugging-port=1337`, then `socat` 9222 -> 1337. OSWorld's
    chrome_open_tabs and Chrome getters connect over CDP to the host's port for the guest's 9222."""
    replay_setup(desktop_guest, official_task("chrome", "030eeff7-b492-4218-b312-701ec99ee0cc"))
    cdp = f"http://{desktop_guest.host}:{desktop_guest.ports.cdp}"

    def version() -> dict | None:
        try:
            return requests.get(cdp + "/json/version", timeout=HTTP_TIMEOUT).json()
        except (requests.RequestException, ValueError):
            return None

    browser = wait_for(version, APP_START_S, "CDP on the leased port")
    assert str(browser["Browser"]).startswith("Chrome/")
    title = f"hcu-cdp-{uuid.uuid4().hex[:6]}"
    # what OSWorld's chrome_open_tabs does through Playwright: the browser's websocket (its address names the
    # leased host port), then a new tab
    with connect(browser["webSocketDebuggerUrl"], open_timeout=30, max_size=None) as cdp_socket:
        answer = _cdp_call(cdp_socket, "Target.createTarget", {"url": f"data:text/html,<title>{title}</title>"})
    assert "targetId" in answer.get("result", {}), answer
    # titled as Google Chrome's windows are (tasks activate "Google Chrome")
    wait_for_window(desktop_guest, lambda t: t == f"{title} - Google Chrome", "Chrome showing the tab opened over CDP")
    profile = desktop_guest.api.execute(["test", "-f", "/home/user/.config/google-chrome/Local State"])
    assert profile.returncode == 0, "Chrome's profile is not where OSWorld's getters read it"
    # where OSWorld's Chrome getters read the active tab's URL: the address bar under "Google Chrome"
    tree = requests.get(desktop_guest.api.base_url + "/accessibility", timeout=HTTP_TIMEOUT).json()["AT"]
    bars = ElementTree.fromstring(tree).findall(
        ".//application[@name='Google Chrome']//entry[@name='Address and search bar']")
    assert bars and bars[0].text, "no address bar under application 'Google Chrome' in /accessibility"
    end_app(desktop_guest, "chrome")


def test_vlc_serves_its_http_interface_on_the_leased_port(desktop_guest: Guest) -> None:
    """vlc/215dfd39: `VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show` (shell), then a pyautogui click.
    OSWorld's VLC getters read /requests/status.xml on the host's port for the guest's 8080."""
    replay_setup(desktop_guest, official_task("vlc", "215dfd39-f493-4bc3-a027-8a97d72c61bf"))
    wait_for_window(desktop_guest, lambda t: "VLC media player" in t, "VLC")
    status_url = f"http://{desktop_guest.host}:{desktop_guest.ports.vlc}/requests/status.xml"

    def status(password: str) -> requests.Response | None:
        try:
            return requests.get(status_url, auth=("", password), timeout=HTTP_TIMEOUT)
        except requests.RequestException:
            return None

    answer = wait_for(lambda: status(VLC_PASSWORD), APP_START_S, "VLC's HTTP interface on the leased port")
    assert answer.status_code == 200 and "<state>" in answer.text, answer.text[:300]
    assert status("not-the-password").status_code == 401
    end_app(desktop_guest, "vlc")


def test_libreoffice_calc_opens_the_task_workbook_in_a_window_named_after_it(desktop_guest: Guest) -> None:
    """libreoffice_calc/0326d92d: the workbook lands in ~, `open` it (xdg-open -> LibreOffice Calc); the
    in-guest server answers once a window with its name is activated."""
    replay_setup(desktop_guest, official_task("libreoffice_calc", "0326d92d-d218-48a8-9ca1-981cd6d064c7"))
    assert "SalesRep.xlsx - LibreOffice Calc" in window_titles(desktop_guest.api)
    version = desktop_guest.api.execute(["libreoffice", "--version"]).output
    assert version.split()[0] == "LibreOffice" and version.split()[1][0].isdigit(), version
    end_app(desktop_guest, "soffice")


def test_libreoffice_writer_opens_the_task_document_in_a_window_named_after_it(desktop_guest: Guest) -> None:
    """libreoffice_writer/0810415c: a .docx on the Desktop, `open`ed by the in-guest server."""
    replay_setup(desktop_guest, official_task("libreoffice_writer", "0810415c-bde4-4443-9047-d5f70165a697"))
    assert "Novels_Intro_Packet.docx - LibreOffice Writer" in window_titles(desktop_guest.api)
    end_app(desktop_guest, "soffice")


def test_libreoffice_impress_starts_from_the_tasks_command_line(desktop_guest: Guest) -> None:
    """libreoffice_impress/2cd43775: `libreoffice --impress`, a new presentation."""
    replay_setup(desktop_guest, official_task("libreoffice_impress", "2cd43775-7085-45d8-89fa-9e35c0a915cf"))
    wait_for_window(desktop_guest, lambda t: t.endswith("- LibreOffice Impress"), "LibreOffice Impress")
    end_app(desktop_guest, "soffice")


def test_gimp_opens_the_task_image(desktop_guest: Guest) -> None:
    """gimp/06ca5602: the image lands on the Desktop, then `gimp /home/user/Desktop/computer.png`."""
    replay_setup(desktop_guest, official_task("gimp", "06ca5602-62ca-47f6-ad4f-da151cde54cc"))
    wait_for_window(desktop_guest, lambda t: "computer" in t and "GIMP" in t, "GIMP showing computer.png")
    end_app(desktop_guest, "gimp")


def test_thunderbird_starts_on_the_unpacked_profile(desktop_guest: Guest) -> None:
    """thunderbird/08c73485: a profile archive unpacked into ~ (here an empty profile), then
    `/usr/bin/thunderbird`."""
    replay_setup(desktop_guest, official_task("thunderbird", "08c73485-7c6d-4681-999d-919f5c32dcfa"))
    wait_for_window(desktop_guest, lambda t: "Thunderbird" in t, "Thunderbird")
    classes = [line.split()[2] for line in desktop_guest.api.execute(["wmctrl", "-lx"]).output.splitlines()]
    assert "Mail.thunderbird" in classes, classes  # the class 6 tasks close Thunderbird's windows by
    end_app(desktop_guest, "thunderbird")


def test_files_shows_the_task_folder(desktop_guest: Guest) -> None:
    """multi_apps/b5062e3e: a folder of PDFs, then `nautilus /home/user/Documents/Papers` (GNOME Files)."""
    replay_setup(desktop_guest, official_task("multi_apps", "b5062e3e-641c-4e3a-907b-ac864d2e7652"))
    wait_for_window(desktop_guest, lambda t: t == "Papers", "Files showing the Papers folder")
    end_app(desktop_guest, "nautilus")


def test_document_viewer_opens_the_task_pdf(desktop_guest: Guest) -> None:
    """multi_apps/36037439: a PDF on the Desktop, `open`ed (xdg-open -> Document Viewer), then pyautogui keys.
    The window is titled "<file> — <document title>", the form tasks activate PDF windows by."""
    replay_setup(desktop_guest, official_task("multi_apps", "36037439-2044-4b50-b9d1-875b5a332143"))
    assert "shi17a.pdf — Stand-in for shi17a" in window_titles(desktop_guest.api)
    end_app(desktop_guest, "evince")


def test_vs_code_is_absent_and_its_launch_answers_an_error_naming_it(desktop_guest: Guest) -> None:
    """vs_code/276cc624: Debian has no VS Code, so `code` is not installed; the guest answers the launch
    with the official error shape naming the missing program (hcu's setup check turns that into a failure)."""
    task = official_task("vs_code", "276cc624-87ea-4f08-ab93-f770e3790175")
    launch = next(step["parameters"] for step in task["config"] if step["type"] == "launch")
    answer = requests.post(desktop_guest.api_url() + "/setup/launch", json=launch, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 500 and answer.json()["status"] == "error"
    assert "'code'" in answer.json()["message"], answer.json()


def test_vnc_is_served_on_the_leased_port(desktop_guest: Guest) -> None:
    """The official image's 8006 serves noVNC; its websocket reaches the X display's VNC server."""
    vnc = f"{desktop_guest.host}:{desktop_guest.ports.vnc}"
    page = wait_for(lambda: _get_or_none(f"http://{vnc}/vnc.html"), APP_START_S, "noVNC on the leased port")
    assert page.status_code == 200 and "noVNC" in page.text
    with connect(f"ws://{vnc}/websockify", subprotocols=["binary"], open_timeout=30) as viewer:  # as noVNC does
        greeting = viewer.recv(timeout=30)
    assert isinstance(greeting, bytes) and greeting.startswith(b"RFB 003."), greeting


def _cdp_call(cdp_socket: ClientConnection, method: str, params: dict) -> dict:
    """Send one CDP command and return its answer (events that come first are passed over)."""
    cdp_socket.send(json.dumps({"id": 1, "method": method, "params": params}))
    while True:
        message = json.loads(cdp_socket.recv(timeout=60))
        if message.get("id") == 1:
            return message


def _get_or_none(url: str) -> requests.Response | None:
    try:
        return requests.get(url, timeout=HTTP_TIMEOUT)
    except requests.RequestException:
        return None
