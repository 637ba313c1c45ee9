"""The built artifact inside a running test desktop container, driven over `docker exec -i`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import docker
import pytest
from mcp import Client, StdioServerParameters

from hcu import REPO_ROOT
from hcu.osworld.records.identity import AttemptId
from tests.session import unique_run_id

IMAGE = os.environ.get("HCU_TEST_DESKTOP_IMAGE", "hcu-test-desktop:latest")
"""The image under test (another tag while a change to it is being built)."""
ARTIFACT = REPO_ROOT / "artifacts" / "computer-use"
GUEST_ARTIFACT = "/opt/cu/computer-use"
APP_TITLE = "HCU Test App"
READY_TIMEOUT_SEC = 60

# Read the app's widgets with the guest's own pyatspi, independent of the server under test.
AX_DUMP = """
import json, pyatspi
out = []
def walk(node, depth=0):
    if node is None or depth > 20: return
    entry = {"role": node.getRoleName(), "name": node.name,
             "states": [s.value_nick for s in node.getState().getStates()]}
    try:
        entry["text"] = node.queryText().getText(0, -1)
    except NotImplementedError:
        pass
    out.append(entry)
    for child in node: walk(child, depth + 1)
for app in pyatspi.Registry.getDesktop(0):
    if app is not None:
        app.clear_cache(); walk(app)
print(json.dumps(out))
"""


def build_artifact() -> Path:
    """The artifact as `make build-local` writes it (a no-op when current)."""
    proc = subprocess.run(["bash", str(REPO_ROOT / "scripts/build-computer-use.sh"), str(ARTIFACT)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"building the computer-use artifact failed:\n{proc.stderr[-2000:]}"
    return ARTIFACT


class Desktop:
    """One running test desktop container with the artifact installed at GUEST_ARTIFACT."""

    def __init__(self, container: docker.models.containers.Container) -> None:
        self.container = container

    def exec(self, cmd: list[str], user: str = "user", timeout: int = 60) -> tuple[int, str]:
        result = self.container.exec_run(["timeout", str(timeout), *cmd], user=user, demux=False)
        return result.exit_code, result.output.decode(errors="replace")

    def ax_nodes(self) -> list[dict]:
        status, out = self.exec(["python3", "-c", AX_DUMP])
        assert status == 0, out
        return json.loads(out.strip().splitlines()[-1])

    def ax_node(self, role: str) -> dict:
        """The app's only widget of `role`, read by the guest's own pyatspi."""
        matches = [n for n in self.ax_nodes() if n["role"] == role]
        assert len(matches) == 1, f"expected one {role} in the guest's accessibility tree, got {matches}"
        return matches[0]

    def kill_app(self) -> None:
        status, out = self.exec(["pgrep", "-f", "/opt/hcu/testapp.py"])
        for pid in out.split():
            self.exec(["kill", pid])
        self.wait_for(lambda: not any(n["name"] == APP_TITLE for n in self.ax_nodes()), "the app to exit")

    def start_app(self) -> None:
        self.container.exec_run(["python3", "/opt/hcu/testapp.py"], user="user", detach=True)
        self.wait_for(lambda: any(n["name"] == APP_TITLE for n in self.ax_nodes()), "the app window")
        self.wait_for(lambda: self.exec(["xdotool", "search", "--onlyvisible", "--name", APP_TITLE])[0] == 0,
                      "the app window to be viewable")

    def start_app_if_closed(self) -> None:
        if not any(n["name"] == APP_TITLE for n in self.ax_nodes()):
            self.start_app()

    def restart_app(self) -> None:
        self.kill_app()
        self.start_app()

    def wait_for(self, condition, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)

    def server(self, *args: str, python: str | None = None) -> StdioServerParameters:
        """How an agent in this guest starts the server, reached from the host through `docker exec -i`."""
        argv = [python, GUEST_ARTIFACT] if python else [GUEST_ARTIFACT]
        return StdioServerParameters(
            command="docker", args=["exec", "-i", "-u", "user", self.container.id, *argv, *args])


@asynccontextmanager
async def connect(params: StdioServerParameters) -> AsyncIterator[Client]:
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        yield client


def put_file(container, path: str, data: bytes, mode: int = 0o755) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(Path(path).name)
        info.size, info.mode, info.uid, info.gid = len(data), mode, 0, 0
        tar.addfile(info, io.BytesIO(data))
    container.exec_run(["mkdir", "-p", str(Path(path).parent)], user="root")
    assert container.put_archive(str(Path(path).parent), buf.getvalue()), f"copying {path} into the guest"


def start_desktop(run_id: str, **run_kwargs) -> Desktop:
    client = docker.from_env(timeout=60)
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"the test desktop image {IMAGE} is missing: run `make test-desktop`")
    labels = AttemptId(run_id=unique_run_id(run_id), task_id="computer-use", attempt=1).labels()
    container = client.containers.run(IMAGE, detach=True, network_mode="none", labels=labels, **run_kwargs)
    desktop = Desktop(container)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SEC
        while b"DESKTOP_READY" not in container.logs():
            assert time.monotonic() < deadline, f"no DESKTOP_READY within {READY_TIMEOUT_SEC} s"
            time.sleep(0.2)
        put_file(container, GUEST_ARTIFACT, build_artifact().read_bytes())
    except BaseException:
        container.remove(force=True, v=True)
        raise
    return desktop
