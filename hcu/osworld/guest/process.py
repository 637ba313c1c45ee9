"""A long-running process inside the guest, driven only through the in-guest HTTP API.

The official guest is a QEMU VM: `docker exec` does not reach into it, and `/execute` gives up after 120 s.
So the agent is started detached in its own session (`setsid`), its stdout/stderr go to files, and the runner
polls the files and the pid with short `/execute` calls. Killing takes the whole process group (Gemini CLI's
relauncher and Grok Build ignore SIGINT; SIGKILL follows SIGTERM).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from hcu.osworld.errors import GuestError
from hcu.osworld.guest.api import GuestAPI

POLL_TIMEOUT_SEC = 30.0


@dataclass(frozen=True)
class ProcessStatus:
    alive: bool
    stdout_bytes: int
    returncode: int | None


class GuestProcess:
    """One detached command in the guest; files under `state_dir` (pid, rc, stdout, stderr)."""

    def __init__(self, api: GuestAPI, state_dir: str, name: str) -> None:
        self.api = api
        self.state_dir = state_dir.rstrip("/")
        base = f"{self.state_dir}/{name}"
        self.pid_path, self.rc_path = f"{base}.pid", f"{base}.rc"
        self.stdout_path, self.stderr_path = f"{base}.stdout", f"{base}.stderr"

    def start(self, argv: list[str], *, env: dict[str, str], cwd: str) -> None:
        inner = (
            f"echo $$ > {q(self.pid_path)}; {shell_command(argv, env=env, cwd=cwd)} "
            f">{q(self.stdout_path)} 2>{q(self.stderr_path)}; echo $? > {q(self.rc_path)}"
        )
        clear = (f"mkdir -p {q(self.state_dir)} && "
                 + shlex.join(["rm", "-f", self.pid_path, self.rc_path, self.stdout_path, self.stderr_path]))
        res = self.api.execute(["sh", "-c", clear], timeout_sec=POLL_TIMEOUT_SEC)
        if res.returncode != 0:
            raise GuestError(f"cannot prepare {self.state_dir} in the guest: {res.error.strip()[-200:]}")
        self.api.launch(["setsid", "sh", "-c", inner])

    def status(self) -> ProcessStatus:
        script = (
            f"s=$(stat -c %s {q(self.stdout_path)} 2>/dev/null || echo 0); "
            f"r=$(cat {q(self.rc_path)} 2>/dev/null || echo -); p=$(cat {q(self.pid_path)} 2>/dev/null); "
            'a=dead; [ -n "$p" ] && kill -0 "$p" 2>/dev/null && a=alive; [ -z "$p" ] && a=starting; '
            'echo "$s $r $a"'
        )
        out = self.api.execute(["sh", "-c", script], timeout_sec=POLL_TIMEOUT_SEC).output.split()
        size, rc, state = (out + ["0", "-", "dead"])[:3]
        return ProcessStatus(alive=state != "dead", stdout_bytes=int(size) if size.isdigit() else 0,
                             returncode=int(rc) if rc.lstrip("-").isdigit() else None)

    def kill(self, grace_sec: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `grace_sec`."""
        pid = q(self.pid_path)
        script = (
            f'p=$(cat {pid} 2>/dev/null) || exit 0; kill -TERM -- -"$p" 2>/dev/null; '
            f'for i in $(seq 1 {max(1, int(grace_sec * 10))}); do kill -0 -- -"$p" 2>/dev/null || exit 0; '
            'sleep 0.1; done; kill -KILL -- -"$p" 2>/dev/null; exit 0'
        )
        self.api.execute(["sh", "-c", script], timeout_sec=POLL_TIMEOUT_SEC + grace_sec)

    def read_stdout(self) -> bytes:
        return self._read(self.stdout_path)

    def read_stderr(self) -> bytes:
        return self._read(self.stderr_path)

    def _read(self, path: str) -> bytes:
        try:
            return self.api.file(path)
        except FileNotFoundError:
            return b""


def shell_command(argv: list[str], *, env: dict[str, str], cwd: str) -> str:
    """`argv` as a guest shell command: in `cwd`, with `env` added, stdin closed (Codex waits on an open one)."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    return f"cd {shlex.quote(cwd)} && env {assignments} {shlex.join(argv)} </dev/null"


def q(path: str) -> str:
    return shlex.quote(path)
