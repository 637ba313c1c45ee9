"""The locally built test desktop (scripts/test-desktop): image budget, container contract, and the
in-guest HTTP API behaving like the official guest's for what OSWorld `os` tasks use.

Plain docker SDK calls on purpose: this checks the image itself, not hcu's guest lifecycle code.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import struct
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.models.containers
import pytest
import requests

from hcu import REPO_ROOT
from hcu.osworld.records.identity import AttemptId
from tests.session import unique_run_id

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("HCU_TEST_DESKTOP_IMAGE", "hcu-test-desktop:latest")
"""The image under test (another tag while a change to it is being built)."""
BUILD_SCRIPT = Path(REPO_ROOT) / "scripts" / "test-desktop" / "build.sh"
RUN_ID = unique_run_id("test-desktop-tests")
PASSWORD = "pw-" + uuid.uuid4().hex[:8]
IMAGE_BUDGET_BYTES = 3_000_000_000
HTTP_TIMEOUT_S = 30
NS_STATE = "{https://accessibility.ubuntu.example.org/ns/state}"
NS_COMPONENT = "{https://accessibility.ubuntu.example.org/ns/component}"


def wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = 60.0, every_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException):
            value = predicate()
            if value:
                return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


@dataclass
class Desktop:
    """A running test desktop container and its API base URL."""

    container: docker.models.containers.Container
    base_url: str
    api_ready_s: float
    desktop_ready_s: float

    def get(self, path: str) -> requests.Response:
        return requests.get(self.base_url + path, timeout=HTTP_TIMEOUT_S)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.post(self.base_url + path, timeout=HTTP_TIMEOUT_S, **kwargs)

    def execute(self, command: list[str] | str, shell: bool = False) -> dict[str, Any]:
        response = self.post("/execute", json={"command": command, "shell": shell})
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="module")
def docker_api() -> Iterator[docker.DockerClient]:
    client = docker.from_env(timeout=120)
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"Docker engine not reachable ({exc}): run `make host`", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="module")
def image(docker_api: docker.DockerClient) -> docker.models.images.Image:
    """The image, built by the repo script (a no-op when the tagged image is current)."""
    build = subprocess.run(["bash", str(BUILD_SCRIPT), IMAGE], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, f"build.sh failed:\n{build.stdout}\n{build.stderr}"
    print(build.stdout.strip())
    return docker_api.images.get(IMAGE)


def start_desktop(client: docker.DockerClient, task_id: str, **run_kwargs: Any) -> Desktop:
    labels = AttemptId(run_id=RUN_ID, task_id=task_id, attempt=1).labels()
    started = time.monotonic()
    container = client.containers.run(
        IMAGE, detach=True, labels=labels, ports={"5000/tcp": ("127.0.0.1", None)}, **run_kwargs
    )
    try:
        container.reload()
        port = container.ports["5000/tcp"][0]["HostPort"]
        base_url = f"http://127.0.0.1:{port}"
        wait_for(lambda: requests.get(base_url + "/platform", timeout=2).ok, "the API on :5000")
        api_ready_s = time.monotonic() - started
        logs = wait_for(lambda: re.search(rb"DESKTOP_READY ([0-9.]+)", container.logs()), "DESKTOP_READY")
        print(f"{task_id}: start -> API ready {api_ready_s:.2f} s, DESKTOP_READY {logs.group(1).decode()} s")
        return Desktop(container, base_url, api_ready_s, float(logs.group(1)))
    except BaseException:
        container.remove(force=True, v=True)
        raise


@pytest.fixture(scope="module")
def desktop(docker_api: docker.DockerClient, image: docker.models.images.Image) -> Iterator[Desktop]:
    running = start_desktop(docker_api, "shared", environment={"CLIENT_PASSWORD": PASSWORD})
    yield running
    running.container.remove(force=True, v=True)


def png_rows(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB, non-interlaced PNG (what the guest sends)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, color, interlace) == (8, 2, 0), "expected 8-bit RGB, non-interlaced"
    raw, stride, rows = zlib.decompress(idat), width * 3, []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride) if kind else ():
            left = line[i - 3] if i >= 3 else 0
            up, up_left = previous[i], previous[i - 3] if i >= 3 else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            else:
                guess = left + up - up_left
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def test_image_size_and_skip_if_current(image: docker.models.images.Image) -> None:
    print(f"image size {image.attrs['Size'] / 1e6:.0f} MB")
    assert image.attrs["Size"] <= IMAGE_BUDGET_BYTES
    assert image.labels.get("hcu.test_desktop.rev"), "the image lacks its rev label"
    again = subprocess.run(["bash", str(BUILD_SCRIPT), IMAGE], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr


def test_official_container_contract_is_accepted(
    docker_api: docker.DockerClient, image: docker.models.images.Image, tmp_path: Path
) -> None:
    """The same env, device, capability and mount requests as the official QEMU guest."""
    assert Path("/dev/kvm").exists(), "/dev/kvm is missing on this host (the official guest needs it too)"
    qcow2 = tmp_path / "System.qcow2"
    qcow2.write_bytes(b"QFI\xfb")
    running = start_desktop(
        docker_api,
        "contract",
        environment={"RAM_SIZE": "4G", "CPU_CORES": "2", "DISK_SIZE": "32G"},
        devices=["/dev/kvm"],
        cap_add=["NET_ADMIN"],
        volumes={str(qcow2): {"bind": "/System.qcow2", "mode": "ro"}},
    )
    try:
        assert running.get("/platform").text == "Linux"
        assert running.execute("echo password | sudo -S -k true", shell=True)["returncode"] == 0
    finally:
        running.container.remove(force=True, v=True)


def test_screenshot_is_a_painted_full_hd_png(desktop: Desktop) -> None:
    response = desktop.get("/screenshot")
    assert response.status_code == 200 and response.headers["Content-Type"] == "image/png"
    width, height, rows = png_rows(response.content)
    assert (width, height) == (1920, 1080)
    colours = {row[x : x + 3] for row in rows[::20] for x in range(0, width * 3, 30)}
    assert len(colours) >= 3, f"screenshot looks blank ({len(colours)} colours sampled)"


def test_execute_runs_as_user_with_official_shapes(desktop: Desktop) -> None:
    assert desktop.execute(["id", "-un"]) == {
        "status": "success",
        "output": "user\n",
        "error": "",
        "returncode": 0,
    }
    assert desktop.execute("ls -d ~/Desktop")["output"] == "/home/user/Desktop\n"  # shlex-split, ~/ expanded
    in_shell = desktop.execute("echo $HOME; exit 3", shell=True)
    assert (in_shell["output"], in_shell["returncode"]) == ("/home/user\n", 3)
    failed = desktop.post("/execute", json={"command": ["/no/such/program"]})
    assert failed.status_code == 500 and failed.json()["status"] == "error"


def test_sudo_takes_the_client_password(desktop: Desktop) -> None:
    wrong = desktop.execute(f"echo wrong-{PASSWORD} | sudo -S -k true", shell=True)
    assert wrong["returncode"] != 0, wrong
    right = desktop.execute(f"echo {PASSWORD} | sudo -S -k whoami", shell=True)
    assert (right["returncode"], right["output"]) == (0, "root\n"), right


def window_list(desktop: Desktop) -> str:
    return desktop.execute(["wmctrl", "-l"])["output"]


def test_ctrl_alt_t_opens_terminal_whose_text_is_readable(desktop: Desktop) -> None:
    desktop.execute(["xdotool", "key", "ctrl+alt+t"])
    try:
        wait_for(lambda: "Terminal" in window_list(desktop), "a Terminal window", 30)
    except AssertionError as exc:
        state = desktop.execute("ps -eo pid,etimes,args; cat /tmp/openbox.log; wmctrl -l", shell=True)
        raise AssertionError(f"{exc}\n{state['output']}{state['error']}") from None
    assert desktop.post("/setup/activate_window", json={"window_name": "Terminal"}).status_code == 200
    marker = uuid.uuid4().hex[:8]
    desktop.execute(["xdotool", "type", "--delay", "20", f"stty size; echo done-{marker}\n"])

    def finished_output() -> str | None:
        text = desktop.get("/terminal").json()["output"] or ""
        return text if text.count(f"done-{marker}") == 2 else None  # the typed line and its output

    output = wait_for(finished_output, "the typed command's output in /terminal", 30)
    assert re.search(r"^\d+ \d+$", output, re.MULTILINE), output
    assert desktop.post("/setup/close_window", json={"window_name": "Terminal"}).status_code == 200
    wait_for(lambda: "Terminal" not in window_list(desktop), "the Terminal closing", 30)


@pytest.mark.parametrize(
    ("schema", "key", "values"),
    [  # keys that OSWorld os tasks set and read
        ("org.gnome.desktop.notifications", "show-banners", ["false", "true"]),
        ("org.gnome.desktop.session", "idle-delay", ["uint32 300", "uint32 600"]),
        ("org.gnome.shell", "favorite-apps", ["['thunderbird.desktop']", "@as []"]),
        ("org.gnome.settings-daemon.plugins.power", "idle-dim", ["false", "true"]),
    ],
)
def test_gsettings_round_trip(desktop: Desktop, schema: str, key: str, values: list[str]) -> None:
    for value in values:
        assert desktop.execute(["gsettings", "set", schema, key, value])["returncode"] == 0
        assert desktop.execute(["gsettings", "get", schema, key])["output"] == value + "\n"


def accessible(desktop: Desktop, role: str, name: str) -> ET.Element:
    tree = ET.fromstring(desktop.get("/accessibility").json()["AT"])
    assert tree.tag == "desktop-frame"
    found = [node for node in tree.iter(role) if node.get("name") == name]
    assert found, f"no {role} named {name!r} in the accessibility tree"
    return found[0]


def app_labels(desktop: Desktop) -> list[str]:
    return [node.text or "" for node in accessible(desktop, "frame", "HCU Test App").iter("label")]


def test_accessibility_tree_has_the_test_app(desktop: Desktop) -> None:
    frame = accessible(desktop, "frame", "HCU Test App")
    assert frame.get(NS_STATE + "showing") == "true"
    names = {(node.tag, node.get("name")) for node in frame.iter()}
    assert {("push-button", "Click me"), ("check-box", "Enable option"), ("text", "Text entry")} <= names
    assert "Not clicked" in app_labels(desktop)


def test_pyautogui_click_as_in_osworld_setup_steps(desktop: Desktop) -> None:
    result = desktop.execute(["python", "-c", "import pyautogui; pyautogui.click(960, 540)"])
    assert result["returncode"] == 0, result
    assert desktop.get("/cursor_position").json() == [960, 540]
    button = accessible(desktop, "push-button", "Click me")
    x, y = ast.literal_eval(button.get(NS_COMPONENT + "screencoord"))  # "(x, y)", as in OSWorld's XML
    width, height = ast.literal_eval(button.get(NS_COMPONENT + "size"))
    click = f"import pyautogui; pyautogui.click({x + width // 2}, {y + height // 2})"
    assert desktop.execute(["python", "-c", click])["returncode"] == 0
    wait_for(lambda: "Clicked" in app_labels(desktop), "the label to read Clicked", 10)


def test_upload_then_file_round_trip(desktop: Desktop) -> None:
    data = uuid.uuid4().bytes * 1000
    path = f"~/Desktop/upload-{uuid.uuid4().hex[:6]}/nested/data.bin"
    files = {"file_data": ("data.bin", data)}
    uploaded = desktop.post("/setup/upload", data={"file_path": path}, files=files)
    assert uploaded.status_code == 200, uploaded.text
    assert desktop.post("/file", data={"file_path": path}).content == data
    missing = desktop.post("/file", data={"file_path": "~/no-such-file"})
    assert (missing.status_code, missing.json()) == (404, {"error": "File not found"})
    tree = desktop.post("/list_directory", json={"path": "/home/user/Desktop"}).json()["directory_tree"]
    assert tree["name"] == "Desktop" and tree["type"] == "directory"


def test_scripts_sizes_and_paths(desktop: Desktop) -> None:
    bash = desktop.post("/run_bash_script", json={"script": "echo out; echo err >&2; exit 4"})
    assert (bash.status_code, bash.json()) == (
        200,
        {"status": "error", "output": "out\nerr\n", "error": "", "returncode": 4},
    )
    python = desktop.post("/run_python", json={"code": "print(6 * 7)"}).json()
    assert (python["status"], python["output"], python["return_code"]) == ("success", "42\n", 0)
    assert desktop.post("/screen_size").json() == {"width": 1920, "height": 1080}
    assert desktop.post("/desktop_path").json() == {"desktop_path": "/home/user/Desktop"}
    assert desktop.get("/platform").text == "Linux"
    assert desktop.post("/end_recording").status_code == 400  # none running (recording: the contract tests)


def test_open_file_opens_a_text_file_in_a_titled_window(desktop: Desktop) -> None:
    path = f"/home/user/Desktop/notes-{uuid.uuid4().hex[:6]}.txt"
    desktop.post("/setup/upload", data={"file_path": path}, files={"file_data": ("n.txt", b"hello\n")})
    opened = desktop.post("/setup/open_file", json={"path": path})
    assert (opened.status_code, opened.text) == (200, "File opened and window activated successfully")
    assert path in window_list(desktop)
    desktop.post("/setup/close_window", json={"window_name": path})
    wait_for(lambda: path not in window_list(desktop), "the editor window closing", 30)
    missing = desktop.post("/setup/open_file", json={"path": "~/no-such-file.txt"})
    assert missing.status_code == 404
