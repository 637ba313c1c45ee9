"""Fixtures for the failure-semantics tests: run_task as a process the test can watch and signal,
task files whose phases block, a guest image whose API never answers, and a gateway that never answers.

Only the model (scripted policy) and the official guest (test desktop) are stand-ins; the runner, gateway,
agent CLI and OSWorld's code are the real ones.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.guest.bridge import bridge_address
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.run_task.conftest import RENAME_TASK, TASKS_DIR
from tests.session import unique_run_id

WAIT_LIMIT_SEC = 600.0
"""Bounds every wait on the runner, so a broken runner fails the test instead of hanging it."""


@dataclass
class StartedTask:
    """A run_task process and where it writes."""

    proc: subprocess.Popen[bytes]
    result_dir: Path
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def phase(self) -> str | None:
        try:
            return orjson.loads((self.result_dir / "progress.json").read_bytes())["phase"]
        except (FileNotFoundError, orjson.JSONDecodeError, KeyError):
            return None

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll `condition` until it holds; fail with the runner's log if the runner exits first."""
        deadline = time.monotonic() + WAIT_LIMIT_SEC
        while not condition():
            assert self.proc.poll() is None, f"run_task exited before {what}:\n{self.log()[-3000:]}"
            assert time.monotonic() < deadline, f"no {what} after {WAIT_LIMIT_SEC:g} s:\n{self.log()[-3000:]}"
            time.sleep(0.05)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def finish(self) -> tuple[TaskResult, int]:
        """Wait for the runner to exit; its result.json and exit status."""
        code = self.proc.wait(timeout=WAIT_LIMIT_SEC)
        assert (self.result_dir / "result.json").is_file(), self.log()[-3000:]
        return read_record(self.result_dir / "result.json", TaskResult), code


StartFn = Callable[..., StartedTask]


@pytest.fixture
def start_task(tmp_path: Path) -> Iterator[StartFn]:
    """Start run_task (codex by default) on the test desktop; every process left running is killed after."""
    started: list[StartedTask] = []

    def start(task_id: str, *, gateway: str, tasks_dir: Path = TASKS_DIR, agent: str = "codex",
              extra_args: list[str] = (), token_log: Path | None = None) -> StartedTask:
        out = tmp_path / f"run-{len(started)}"
        out.mkdir()
        run_id = unique_run_id(f"fail{uuid.uuid4().hex[:6]}")
        argv = [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", task_id, "--task-domain", "os",
                "--tasks-dir", str(tasks_dir), "--test-desktop", "--agent", agent, "--max-model-calls", "20",
                "--gateway", gateway, "--result-dir", str(out / "result"), "--run-id", run_id,
                "--timeout-seconds", "600", "--no-progress-seconds", "120", "--offline-assets",
                "--settle-seconds", "0", "--keep-final-desktop", "none",
                *(["--token-log", str(token_log)] if token_log else []), *extra_args]
        log_path = out / "runner.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=REPO_ROOT)
        started.append(StartedTask(proc, out / "result", log_path))
        return started[-1]

    yield start
    for task in started:
        if task.proc.poll() is None:
            task.proc.kill()
            task.proc.wait()


@pytest.fixture
def blocking_tasks(tmp_path: Path) -> Path:
    """A tasks folder with the demo rename task and two variants whose setup, or whose evaluation, blocks (an
    OSWorld `sleep` step of ten minutes)."""
    folder = tmp_path / "tasks" / "examples" / "os"
    folder.mkdir(parents=True)
    rename = orjson.loads((TASKS_DIR / "examples" / "os" / f"{RENAME_TASK}.json").read_bytes())
    sleep = {"type": "sleep", "parameters": {"seconds": 600}}
    variants = {RENAME_TASK: rename, "setup-blocks": {**rename, "config": [sleep]},
                "evaluation-blocks": {**rename, "evaluator": {**rename["evaluator"], "postconfig": [sleep]}}}
    for task_id, body in variants.items():
        (folder / f"{task_id}.json").write_bytes(orjson.dumps({**body, "id": task_id}))
    return folder.parent.parent


@pytest.fixture(scope="session")
def unanswering_desktop() -> Iterator[str]:
    """The test desktop with `sleep infinity` as its entrypoint: the container runs, its API never answers."""
    client = docker.from_env(timeout=120)
    tag = f"hcu-test-desktop:no-api-{unique_run_id('img')}"
    box = client.containers.create("hcu-test-desktop:latest", entrypoint=["sleep", "infinity"],
                                   labels={"hcu.managed": "1", "hcu.run_id": "fail-image"})
    try:
        box.commit(repository=tag.split(":")[0], tag=tag.split(":")[1],
                   conf={"Entrypoint": ["sleep", "infinity"], "Cmd": []})
    finally:
        box.remove(force=True)
    yield tag
    client.images.remove(tag, force=True)


@pytest.fixture
def silent_gateway() -> Iterator[str]:
    """A listener on the Docker bridge that accepts connections and never answers: a gateway that hangs."""
    server = socket.socket()
    server.bind((bridge_address(), 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://{server.getsockname()[0]}:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def labelled_containers(run_id: str) -> list[str]:
    with contextlib.closing(docker.from_env(timeout=60)) as client:
        return [c.name for c in client.containers.list(all=True, filters={"label": f"hcu.run_id={run_id}"})]


def write_policies(folder: Path, policies: dict[str, dict]) -> Path:
    path = folder / "policies.json"
    path.write_bytes(orjson.dumps({"policies": policies}))
    return path
