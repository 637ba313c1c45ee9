"""Real-tier helper: a test desktop container holding an adapter's rendered plan, where the real CLI runs as
`user` (the scripted model and the gateway come from hcu.demo.stand_in)."""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

import docker

from hcu.defaults import GUEST
from hcu.osworld.agents.base import AgentContext, AgentPlan
from hcu.osworld.records.identity import AttemptId
from tests.session import unique_run_id

IMAGE = GUEST.test_desktop_image
GUEST_UID = 1000


class Guest:
    """A running test desktop container."""

    def __init__(self, container: docker.models.containers.Container) -> None:
        self.container = container

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, timeout: int = 120,
            cwd: str = "/home/user") -> tuple[int, str, str]:
        """As `user`, stdin from /dev/null (Codex waits on an open stdin), bounded by `timeout`."""
        wrapped = ["timeout", "-k", "5", str(timeout), "sh", "-c", 'exec "$@" </dev/null', "sh", *argv]
        res = self.container.exec_run(wrapped, user="user", workdir=cwd, environment=env or {}, demux=True)
        out, err = res.output
        return res.exit_code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def upload(self, plan: AgentPlan, extra: dict[str, Path], home: str = "/home/user") -> None:
        """All plan files (and `extra` guest path -> host file) in one tar owned by `user`."""
        with tempfile.TemporaryFile() as buf:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                dirs = sorted({str(p) for f in [*(g.guest_path for g in plan.files), *extra]
                               for p in PurePosixPath(f).parents if str(p).startswith(home + "/")})
                for d in dirs:
                    tar.addfile(_info(d, tarfile.DIRTYPE, 0o755))
                for f in plan.files:
                    if f.data is not None:
                        info = _info(f.guest_path, tarfile.REGTYPE, f.mode, len(f.data))
                        tar.addfile(info, io.BytesIO(f.data))
                    else:
                        _add_file(tar, f.guest_path, Path(f.host_path), f.mode)
                for guest_path, host_path in extra.items():
                    _add_file(tar, guest_path, host_path, 0o755)
            buf.seek(0)
            assert self.container.put_archive("/", buf), "put_archive failed"


def _info(path: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.lstrip("/"))
    info.type, info.mode, info.size = kind, mode, size
    info.uid = info.gid = GUEST_UID
    return info


def _add_file(tar: tarfile.TarFile, guest_path: str, host_path: Path, mode: int) -> None:
    assert host_path.is_file(), f"{host_path} is missing (run `make agents` and `make build-local`)"
    with host_path.open("rb") as fh:
        tar.addfile(_info(guest_path, tarfile.REGTYPE, mode, host_path.stat().st_size), fh)


API_LISTENS = "import socket; socket.create_connection(('127.0.0.1', 5000), timeout=2).close()"


@contextmanager
def desktop_container(run_id: str, task_id: str) -> Iterator[Guest]:
    client = docker.from_env(timeout=120)
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        raise AssertionError(f"the test desktop image {IMAGE} is missing: run `make test-desktop`") from None
    labels = AttemptId(run_id=unique_run_id(run_id), task_id=task_id, attempt=1).labels()
    container = client.containers.run(IMAGE, detach=True, labels=labels)
    try:
        deadline = time.monotonic() + 60
        while b"DESKTOP_READY" not in container.logs():
            assert time.monotonic() < deadline, "the test desktop printed no DESKTOP_READY within 60 s"
            time.sleep(0.2)
        # its API server starts beside the desktop, not before DESKTOP_READY: wait until it listens
        while container.exec_run(["python3", "-c", API_LISTENS]).exit_code != 0:
            assert time.monotonic() < deadline, "the test desktop's API did not listen within 60 s"
            time.sleep(0.2)
        yield Guest(container)
    finally:
        container.remove(force=True, v=True)


def prepare(guest: Guest, plan: AgentPlan, ctx: AgentContext, computer_use: Path) -> str:
    """Upload, run the plan's preparation, and check `--version` the way the runner's preflight does;
    warms computer-use (its first start unpacks compiled parts) like the MCP probe would."""
    guest.upload(plan, {ctx.computer_use_path: computer_use})
    for argv in plan.prepare_argv:
        rc, out, err = guest.run(argv)
        assert rc == 0, f"prepare step {argv} failed ({rc}): {err[-1000:]}"
    rc, _, err = guest.run([plan.mcp_server.command, *plan.mcp_server.args, "--list-tools"], timeout=180)
    assert rc == 0, f"computer-use does not start in the guest: {err[-1000:]}"
    rc, out, err = guest.run(plan.version_argv, env=plan.env)
    assert rc == 0, f"{plan.version_argv} failed ({rc}): {(err or out)[-1000:]}"
    return out.strip()
