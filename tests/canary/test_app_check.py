"""What setup checks after each step that starts an application (the probes themselves run against real guests
in test_strict_setup_docker.py and in every canary of the sweep)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hcu.osworld.attempt.app_check import AppCheck
from tests.official_tasks import official_task

CHROME = ["a window of Google Chrome",
          "Chrome's profile written (Default/Preferences, read by OSWorld's Chrome getters)"]
CDP = ["Chrome's CDP answering on the leased port 20001"]
BRIDGE = ["socat's bridge to Chrome's debugging port running"]
GUEST = SimpleNamespace(host="172.17.0.1", ports=SimpleNamespace(api=20000, cdp=20001, vnc=20002, vlc=20003))


def expected(step: dict) -> list[str]:
    return [e.what for e in AppCheck(GUEST).expectations(step)]  # type: ignore[arg-type]


def launch(command: list[str] | str, shell: bool = False) -> dict:
    return {"type": "launch", "parameters": {"command": command, "shell": shell}}


@pytest.mark.parametrize(("step", "checks"), [
    (launch(["google-chrome", "--remote-debugging-port=1337"]), CHROME),
    (launch(["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]), BRIDGE),
    (launch("VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show", shell=True),
     ["a window of VLC", "VLC's HTTP interface on the leased port 20003"]),
    (launch(["gimp", "/home/user/Desktop/computer.png"]), ["a window of GIMP", "a window titled with computer"]),
    (launch(["gimp", "/home/user/Desktop/yicun.raw"]),  # GIMP has no RAW loader: it says so, as on the official guest
     ["a window of GIMP", "a window titled with GIMP's message for yicun.raw (no RAW loader)"]),
    (launch(["libreoffice", "--calc", "/home/user/exam/grades.xlsx"]),
     ["a window of LibreOffice", "a window titled with grades"]),
    (launch(["/usr/bin/thunderbird"]), ["a window of Thunderbird", "Thunderbird's message index written "
                                        "(global-messages-db.sqlite, read by OSWorld's Thunderbird getters)"]),
    (launch(["nautilus", "/home/user/exam/"]), ["a window of Files", "a window titled with exam"]),
    (launch(["pkill", "chrome"]), []),
    ({"type": "open", "parameters": {"path": "/home/user/Desktop/landscape.mp4"}},
     ["a window titled with landscape.mp4", "VLC's HTTP interface on the leased port 20003"]),
    ({"type": "open", "parameters": {"path": "/home/user/SalesRep.xlsx"}}, ["a window titled with SalesRep.xlsx"]),
    ({"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://www.lonelyplanet.com", "https://a.b/"]}},
     ["2 tab(s) open over CDP"]),
    ({"type": "execute", "parameters": {"command": ["python", "-c", "import pyautogui"]}}, []),
])
def test_each_application_step_is_followed_by_a_check_of_what_getters_read(step: dict, checks: list[str]) -> None:
    assert expected(step) == checks


def test_chrome_is_checked_through_cdp_once_it_and_the_tasks_bridge_both_ran() -> None:
    task = official_task("chrome", "030eeff7-b492-4218-b312-701ec99ee0cc")
    check = AppCheck(GUEST)  # type: ignore[arg-type]
    assert [[e.what for e in check.expectations(step)] for step in task["config"]] == [CHROME, CDP]
    bridge_first = AppCheck(GUEST)  # type: ignore[arg-type]
    # multi_apps/48c46dc7 starts the bridge and leaves Chrome to the agent
    assert [e.what for e in bridge_first.expectations(task["config"][1])] == BRIDGE
    assert [e.what for e in bridge_first.expectations(task["config"][0])] == [*CHROME, *CDP]
