"""Path safety: the viewer hands out files of the run directory only, and never its key, whichever way a path
is spelled (`..`, encoded dots and slashes, absolute paths, symlinks out of the run) — checked on the function
and on the real server with requests sent byte for byte."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from hcu.osworld.view.data import RunData
from hcu.osworld.view.paths import PathRefused, join_inside, resolve_in_run
from hcu.osworld.view.server import make_app
from hcu.osworld.view.site import Site
from tests.view.sample_run import SampleRun

REFUSED = ["../gateway-scope.key", "gateway-scope.key", "tasks/../gateway-scope.key", "/etc/passwd", "//etc/passwd",
           "tasks/x/../../../etc/passwd.json", "tasks\\..\\config.json", "tasks/./x.png", "", "config.json\0.png",
           "tasks/x/.osworld-cache/a.json", "tasks/x/evidence.sh", "keys/extra.key"]


@pytest.mark.parametrize("relative", REFUSED)
def test_paths_that_leave_the_run_or_name_a_key_are_refused(sample: SampleRun, relative: str) -> None:
    with pytest.raises(PathRefused):
        resolve_in_run(sample.run_dir, relative)


def test_a_run_file_resolves(sample: SampleRun) -> None:
    key = sample.attempts[0].key
    assert resolve_in_run(sample.run_dir, f"tasks/{key}/steps/step-002.jpg").is_file()
    assert resolve_in_run(sample.run_dir, "config.json") == (sample.run_dir / "config.json").resolve()


@pytest.fixture
def links_out(sample: SampleRun, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Symlinks inside the run: one to a file outside it, one to its own key file."""
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"not the run's")
    folder = sample.run_dir / "tasks" / sample.attempts[0].key
    made = {"out": folder / "steps" / "escape.png", "key": folder / "key.json"}
    os.symlink(outside, made["out"])
    os.symlink(sample.run_dir / "gateway-scope.key", made["key"])
    yield {name: str(path.relative_to(sample.run_dir)) for name, path in made.items()}
    for path in made.values():
        path.unlink()


def test_symlinks_out_of_the_run_or_to_its_key_are_refused(sample: SampleRun, links_out: dict[str, str]) -> None:
    for relative in links_out.values():
        with pytest.raises(PathRefused):
            resolve_in_run(sample.run_dir, relative)


def test_a_record_cannot_point_a_page_outside_its_attempt() -> None:
    assert join_inside("tasks/t", "steps/a.png") == "tasks/t/steps/a.png"
    assert join_inside("tasks/t", "../u/steps/a.png") is None
    assert join_inside("tasks/t", "/etc/passwd.png") is None


@pytest.fixture
async def server(sample: SampleRun) -> AsyncIterator[TestServer]:
    async with TestServer(make_app(Site(RunData(sample.run_dir))), host="127.0.0.1") as test_server:
        yield test_server


async def raw_get(server: TestServer, target: str, host: str = "127.0.0.1") -> tuple[int, bytes]:
    """A GET sent as written: no client normalises or re-encodes `target`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}:{server.port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


SERVED_REFUSED = ["/files/../gateway-scope.key", "/files/..%2Fgateway-scope.key", "/files/%2e%2e/gateway-scope.key",
                  "/files/gateway-scope.key", "/files/%2Fetc%2Fpasswd", "/files//etc/passwd",
                  "/files/tasks/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/files/tasks%2F..%2F..%2Fetc%2Fpasswd",
                  "/files/..%5cgateway-scope.key", "/tasks/..%2F..%2F..%2Fetc", "/tasks/..", "/retries/%2e%2e",
                  "/static/..%2Fdata.py", "/static/viewer.py", "/other/files/config.json", "/compare"]


@pytest.mark.parametrize("target", SERVED_REFUSED)
async def test_the_server_refuses_every_escape(server: TestServer, sample: SampleRun, target: str) -> None:
    status, body = await raw_get(server, target)
    assert status in (400, 403, 404), (target, status)
    key = (sample.run_dir / "gateway-scope.key").read_text().strip()
    assert key.encode() not in body and b"root:" not in body


async def test_the_server_refuses_symlinks_out(server: TestServer, links_out: dict[str, str]) -> None:
    for relative in links_out.values():
        status, body = await raw_get(server, f"/files/{relative}")
        assert status == 404 and b"not the run's" not in body


async def test_the_server_serves_run_files_and_pages(server: TestServer, sample: SampleRun) -> None:
    key = sample.attempts[0].key
    status, body = await raw_get(server, f"/files/tasks/{key}/steps/step-002.jpg")
    assert status == 200 and body[:3] == b"\xff\xd8\xff", "a JPEG, byte for byte"
    assert (await raw_get(server, f"/tasks/{key}"))[0] == 200
    assert (await raw_get(server, "/"))[0] == 200


async def test_a_loopback_viewer_answers_for_localhost_only(server: TestServer) -> None:
    assert (await raw_get(server, "/", host="localhost"))[0] == 200
    assert (await raw_get(server, "/", host="attacker.example"))[0] == 403, "DNS rebinding"


async def test_every_answer_forbids_other_origins(server: TestServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET /nope HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: close\r\n\r\n".encode())
    head = (await asyncio.wait_for(reader.read(), timeout=30)).partition(b"\r\n\r\n")[0].decode().lower()
    writer.close()
    assert "content-security-policy: default-src 'self'" in head and "x-content-type-options: nosniff" in head
