"""What the guest answered to OSWorld's own requests, seen in the OSWorld process: the messages kept (password
masked), the exchanges a step or a getter made, and which getters read nothing. A loopback HTTP server answers
the way the in-guest server does."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from hcu.osworld.attempt.failures import translate
from hcu.osworld.guest.answer import MESSAGE_LIMIT, answer_message
from hcu.osworld.osworld_bridge.assets import AssetCache
from hcu.osworld.osworld_bridge.child.getter_state import read_nothing, wrap_getters
from hcu.osworld.osworld_bridge.child.guest_traffic import Watch, failures
from hcu.osworld.osworld_bridge.child.offline import RefusingProxy
from hcu.osworld.osworld_bridge.process import OSWorldCodeError
from hcu.osworld.osworld_bridge.setup import SetupStepError, run_steps

PASSWORD = "pw-Zq81"
ANSWERS = {  # path: (status, content type, body)
    "/setup/launch": (500, "application/json", {"status": "error", "message": f"no such file: 'echo {PASSWORD}'"}),
    "/setup/execute": (200, "application/json", {"status": "success", "output": "", "error": "", "returncode": 1}),
    "/setup/open_file": (500, "text/html", "Failed to find window for report.docx within 120 seconds."),
    "/file": (404, "application/json", {"error": "File not found"}),
    "/terminal": (500, "application/json", {"status": "error", "message": "no terminal"}),
    "/screen_size": (200, "application/json", {"width": 1920, "height": 1080}),
}


class GuestLike(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, kind, body = ANSWERS[self.path]
        data = (json.dumps(body) if kind == "application/json" else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def guest() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), GuestLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_message_of_an_answer_is_one_masked_line() -> None:
    assert answer_message('{"status": "error", "message": "bad\\n  thing"}') == "bad thing"
    assert answer_message('{"error": "File not found"}') == "File not found"
    assert answer_message('{"output": "a command\'s own output", "returncode": 1}') == ""
    assert answer_message(f"Failed: sudo -S with {PASSWORD}", PASSWORD) == "Failed: sudo -S with ***"
    long = answer_message("x" * 1000)
    assert len(long) == MESSAGE_LIMIT and long.endswith("...")


def test_a_watch_keeps_every_exchange_with_the_guest_and_what_it_answered(guest: str) -> None:
    watch = Watch("127.0.0.1", PASSWORD)
    mark = watch.mark()
    with watch.on():
        requests.get(guest + "/terminal", timeout=5)  # SetupController's probe: its answer is ignored by design
        requests.post(guest + "/setup/launch", json={"command": ["x"]}, timeout=5)
        requests.post(guest + "/setup/execute", json={"command": ["pkill", "x"]}, timeout=5)
        requests.post(guest + "/setup/open_file", json={"path": "~/report.docx"}, timeout=5)
        requests.post(guest + "/file", data={"file_path": "/home/user/out.xlsx"}, timeout=5)
    requests.get(guest + "/screen_size", timeout=5)  # after the watch: not kept
    seen = watch.since(mark)
    assert [(e.method, e.path, e.status, e.ok) for e in seen] == [
        ("GET", "/terminal", 500, False), ("POST", "/setup/launch", 500, False),
        ("POST", "/setup/execute", 200, True), ("POST", "/setup/open_file", 500, False),
        ("POST", "/file", 404, False)]
    assert seen[2].returncode == 1, "a command that exits 1 is an answer, recorded, not a failure"
    assert [e.line() for e in failures(seen, skip_probe=True)] == [
        "POST /setup/launch -> HTTP 500: no such file: 'echo ***'",
        "POST /setup/open_file -> HTTP 500: Failed to find window for report.docx within 120 seconds.",
        "POST /file (/home/user/out.xlsx) -> HTTP 404: File not found"]
    assert PASSWORD not in json.dumps([e.record() for e in seen])


def test_no_answer_is_a_failure_and_the_request_still_raises(guest: str) -> None:
    watch = Watch("127.0.0.1", PASSWORD)
    dead = "http://127.0.0.1:9/setup/launch"  # nothing listens on the discard port
    with watch.on(), pytest.raises(requests.ConnectionError):
        requests.post(dead, json={}, timeout=2)
    (exchange,) = watch.since(0)
    assert (exchange.status, exchange.ok) == (None, False) and exchange.line().startswith(
        "POST /setup/launch -> no answer: ConnectionError")


def test_getters_that_read_nothing_are_named_with_why(guest: str) -> None:
    log = logging.getLogger("desktopenv.getters.test")

    def get_vm_file(env, config):  # the shape of OSWorld's: a 404 becomes None
        answer = requests.post(guest + "/file", data={"file_path": config["path"]}, timeout=5)
        return None if answer.status_code != 200 else answer.content

    def get_enable_do_not_track(env, config):  # a failed fetch, a parse error, then a default value
        requests.post(guest + "/file", data={"file_path": "/home/user/.config/google-chrome/Default/Preferences"},
                      timeout=5)
        log.error("Error: the JSON object must be str, bytes or bytearray, not NoneType")
        return "false"

    def get_screen_size(env, config):
        return requests.get(guest + "/screen_size", timeout=5).json()

    def get_cache_file(env, config):
        raise FileNotFoundError("thunder-local-folder.ls")

    watch, calls = Watch("127.0.0.1", PASSWORD), []
    getters = wrap_getters([get_vm_file, get_enable_do_not_track, get_screen_size, get_cache_file], watch, calls)
    with watch.on():
        assert getters[0](None, {"path": "/home/user/out.xlsx"}) is None
        assert getters[1](None, {}) == "false"
        assert getters[2](None, {}) == {"width": 1920, "height": 1080}
        with pytest.raises(FileNotFoundError):  # DesktopEnv.evaluate turns it into a 0: still recorded
            getters[3](None, {})
    assert read_nothing(calls) == [
        {"getter": "vm_file", "reason": "returned None; guest: POST /file (/home/user/out.xlsx) -> HTTP 404: "
                                        "File not found"},
        {"getter": "enable_do_not_track",
         "reason": "guest: POST /file (/home/user/.config/google-chrome/Default/Preferences) -> HTTP 404: File not "
                   "found; logged: Error: the JSON object must be str, bytes or bytearray, not NoneType"},
        {"getter": "cache_file", "reason": "raised FileNotFoundError: thunder-local-folder.ls"},
    ]


class _RefusingProcess:
    """An OSWorld process whose step failed as the child reports a launch the guest refused."""

    def __init__(self, message: str) -> None:
        self.message = message

    def call(self, method: str, params: dict, *, deadline_sec: float, what: str) -> dict:
        raise OSWorldCodeError(what, self.message, kind="step_failed")


@pytest.mark.parametrize(("kind", "command", "missing", "expected"), [
    ("launch", ["code", "/home/user/project"], "code", "configuration"),  # every attempt fails the same way
    ("launch", "gimp /home/user/x.png", "gimp", "configuration"),
    ("launch", ["code", "/home/user/missing.txt"], "/home/user/missing.txt", "setup"),  # the program ran
    ("command", ["code", "--install-extension", "ms-python.python"], "code", "configuration"),
    ("execute", ["/opt/tool", "--run"], "/opt/tool", "setup"),  # a task's own tool: not an application
])
def test_a_program_the_guest_lacks_is_a_missing_application(tmp_path, kind, command, missing, expected) -> None:
    program = (command.split() if isinstance(command, str) else command)[0]
    refused = _RefusingProcess(f"the guest answered POST /setup/{kind} -> HTTP 500: "
                               f"[Errno 2] No such file or directory: '{missing}'")
    step = {"type": kind, "parameters": {"command": command}}
    with pytest.raises(SetupStepError) as failed:
        run_steps(refused, [step], password="pw", cache_dir=tmp_path,  # type: ignore[arg-type]
                  assets=AssetCache(root=tmp_path / "assets"), step_deadline_sec=10)
    assert translate(failed.value, "setup").classification == expected
    named = {"code": "VS Code", "gimp": "GIMP"}.get(program, program)
    assert (f"missing application: {named} (`{program}`)" in str(failed.value)) == (expected == "configuration")
    assert "\n" not in str(failed.value)


def test_a_librarys_own_telemetry_is_refused_offline_but_never_named_as_the_tasks_fetch() -> None:
    """onnxruntime reports usage from its own thread at any time: named, it would end up in whatever step
    failed next (seen: the missing-application error of a vs_code canary)."""
    proxy = RefusingProxy()
    via = {"http": proxy.url, "https": proxy.url}
    for url in ("http://mobile.events.data.microsoft.com/OneCollector/1.0/", "http://example.com/in.xlsx"):
        assert requests.get(url, proxies=via, timeout=10).status_code == 403
    assert proxy.take_refused() == ["http://example.com/in.xlsx"]
    proxy.server.shutdown()
