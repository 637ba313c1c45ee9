"""Fixtures for the setup/evaluation tests: the official task files, a loopback asset server, guests."""

from __future__ import annotations

import contextlib
import shutil
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from tests.official_tasks import OFFICIAL_TASKS
from tests.session import TEST_DESKTOP_IMAGE

GUEST_PASSWORD = "hcu-Pw-7q2x9"
"""Distinctive, so a test can tell whether it leaked into records or logs."""


@pytest.fixture(scope="session")
def official_tasks() -> Path:
    examples = OFFICIAL_TASKS / "examples" / "os"
    assert examples.is_dir(), f"the official OSWorld task files are missing: {examples}"
    return OFFICIAL_TASKS


def write_task(tasks_dir: Path, domain: str, task: dict) -> Path:
    """A task file in the official layout (`examples/<domain>/<id>.json`)."""
    path = tasks_dir / "examples" / domain / f"{task['id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(task, option=orjson.OPT_INDENT_2))
    return path


class AssetServer:
    """A loopback HTTP server serving a folder laid out like the asset cache (`<host>/<path>`), counting
    the requests it answers so a test can tell a cache hit from a download."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def put(self, original_url: str, data: bytes) -> None:
        """Serve `data` at the mirror place of `original_url`."""
        from hcu.osworld.osworld_bridge.assets import cache_path

        path = cache_path(self.root, original_url)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture
def asset_server(tmp_path: Path) -> Iterator[AssetServer]:
    server = AssetServer(tmp_path / "served")
    server.root.mkdir()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture
def fake_jpeg() -> bytes:
    """Bytes standing in for a task's photo: the guest only stores them, nothing decodes them."""
    return b"\xff\xd8\xff\xe0" + uuid.uuid4().bytes * 64 + b"\xff\xd9"


@pytest.fixture(scope="module")
def test_desktop_guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One test-desktop guest per module, started and removed through hcu's own guest lifecycle."""
    from hcu.osworld.guest.lifecycle import GuestSpec, remove_guest, start_guest
    from hcu.osworld.records.identity import AttemptId

    spec = GuestSpec(kind="test-desktop", image=TEST_DESKTOP_IMAGE, client_password=GUEST_PASSWORD)
    attempt = AttemptId(run_id=f"setup-eval-{uuid.uuid4().hex[:8]}", task_id="setup-eval", attempt=1)
    guest = start_guest(spec, attempt, work_dir=tmp_path_factory.mktemp("guest"), boot_timeout_sec=120)
    try:
        yield guest
    finally:
        remove_guest(guest)


@pytest.fixture(scope="session")
def evaluator_python() -> Path:
    """The evaluator venv's interpreter (`make osworld-venv`): the default OSWorld process."""
    from hcu.osworld.osworld_bridge.process import EVALUATOR_VENV, resolve_python

    python = EVALUATOR_VENV / "bin" / "python"
    assert python.is_file(), f"the evaluator venv is missing: {python} (run `make osworld-venv`)"
    assert resolve_python(None) == python
    return python


@pytest.fixture
def desktop_env_checkout(tmp_path: Path, evaluator_python: Path) -> Path:
    """The evaluator venv's `desktop_env` package laid out as an OSWorld checkout (`<root>/desktop_env`)."""
    from hcu.osworld.osworld_bridge.process import osworld_identity

    root = tmp_path / "OSWorld"
    shutil.copytree(osworld_identity(evaluator_python)["desktop_env"], root / "desktop_env",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


@contextlib.contextmanager
def osworld_on(guest, cache_root: Path, *, offline: bool = True, python: Path | None = None) -> Iterator[tuple]:
    """An OSWorld process opened on `guest` with a per-test cache: yields (process, cache_dir)."""
    from hcu.osworld.osworld_bridge.process import OSWorldProcess, resolve_python
    from hcu.osworld.osworld_bridge.setup import open_on_guest

    cache_dir = cache_root / "osworld-cache" / "task"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with OSWorldProcess(resolve_python(python), work_dir=cache_root / "osworld-process",
                        secret=guest.spec.client_password, what="test") as process:
        open_on_guest(process, guest, cache_dir, offline_assets=offline)
        yield process, cache_dir


@pytest.fixture(scope="module")
def osworld(test_desktop_guest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """One OSWorld process per module on the module's guest, offline (OSWorld's import costs seconds); a test
    whose call overruns a deadline kills it, and the next call starts another."""
    with osworld_on(test_desktop_guest, tmp_path_factory.mktemp("osworld")) as opened:
        yield opened
