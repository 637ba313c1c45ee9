"""hcu's side of the process boundary: one OSWorld process (`python -m hcu.osworld.osworld_bridge.child` in the
OSWorld interpreter), driven over `protocol`, each call under a deadline.

A call that overruns its deadline kills the child's whole process group (the child, and Playwright's driver
or anything else it started): after a deadline nothing of that call can still reach the guest. The next call
starts a fresh child and replays the `open` context. The child gets a small environment (no credentials of
hcu's), its own working folder, and the client password only through its stdin; its stderr is logged with the
password masked.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from hcu import REPO_ROOT
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.osworld_bridge import protocol

log = logging.getLogger("hcu.osworld.child")

EVALUATOR_VENV = REPO_ROOT / ".venv-osworld"
"""The venv `make osworld-venv` builds with OSWorld's full evaluator dependencies."""
START_DEADLINE_SEC = 180.0
"""For a child to start and answer `hello` (no OSWorld import happens before the first real op)."""
OPEN_DEADLINE_SEC = 300.0
"""`open` imports OSWorld's controllers, which import every metric (torch and easyocr among them)."""
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PLAYWRIGHT_BROWSERS_PATH", "OSWORLD_V2_ROOT",
              "WEBSITE_HOST_SUFFIX", "GITLAB_URL", "GITLAB_PRIVATE_TOKEN", "PROXY_CONFIG_FILE")
PASSED_PREFIXES = ("OSWORLD_",)
"""The child's environment: basics, and the variables OSWorld-V2's services read; nothing else of hcu's."""
STDERR_TAIL = 20


class OSWorldCodeError(HcuOSWorldError):
    """The OSWorld process could not run a call: no interpreter, a crash, a deadline, or OSWorld's code failed.
    `kind` is the child's error kind (protocol.ERROR_KINDS) or `deadline` / `process`; `what` names the call and
    `detail` says what went wrong (the message is both). The attempt runner decides its failure class
    (errors.OSWORLD_ERROR_CLASSES, else the phase's)."""

    def __init__(self, what: str, detail: str, kind: str = "process") -> None:
        super().__init__(f"{what}: {detail}" if what else detail)
        self.what, self.detail, self.kind = what, detail, kind


def resolve_python(explicit: Path | None) -> Path:
    """`explicit`, else the evaluator venv, else this interpreter when it has OSWorld (the reference's `$PY`)."""
    if explicit is not None:
        if not Path(explicit).is_file():
            raise OSWorldCodeError("osworld_python", f"{explicit} does not exist", kind="missing_module")
        return Path(explicit).absolute()  # not resolved: a venv's python is a symlink out of the venv
    venv_python = EVALUATOR_VENV / "bin" / "python"
    if venv_python.is_file():
        return venv_python
    import importlib.util

    if importlib.util.find_spec("desktop_env") is not None:
        return Path(sys.executable)
    raise OSWorldCodeError(
        "osworld_python", f"no OSWorld interpreter ({venv_python} does not exist: run `make osworld-venv`, "
        "or pass --osworld-python with an OSWorld checkout's interpreter)", kind="missing_module")


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_PREFIXES)}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class OSWorldProcess:
    """One OSWorld process at a time; `call` starts one when none is running."""

    def __init__(self, python: Path, *, work_dir: Path, secret: str = "", what: str = "osworld") -> None:
        self.python, self.work_dir, self.secret, self.what = Path(python), Path(work_dir), secret, what
        self._proc: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._context: dict[str, Any] | None = None
        self._last_open: dict[str, Any] = {}
        self._stderr_reader: threading.Thread | None = None
        self._next_id = 0
        self._starting = threading.Lock()
        self._shut = False
        self.hello: dict[str, Any] = {}

    def __enter__(self) -> OSWorldProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, **context: Any) -> dict[str, Any]:
        """Tell the child which guest and cache the next calls use; replayed into every restarted child. A
        running child is told at once (a sweep reuses one child, and its loaded OSWorld code, for many guests)."""
        self._context = context
        if self._proc is not None and self._proc.poll() is None:
            self._last_open = self._request("open", context, OPEN_DEADLINE_SEC, "loading OSWorld's code")
        else:
            self._ensure_started()
        return self._last_open

    def call(self, op: str, args: dict[str, Any], *, deadline_sec: float, what: str) -> Any:
        self._ensure_started()
        return self._request(op, args, deadline_sec, what)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill(proc)

    def kill(self) -> None:
        """End the child and everything it started, now."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._kill(proc)

    def shutdown(self) -> None:
        """End the child now and start no other: the attempt is over (a call another thread is making fails)."""
        with self._starting:
            self._shut = True
        self.kill()

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    # ---------------------------------------------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._start()
        self.hello = self._request("hello", {}, START_DEADLINE_SEC, "starting the OSWorld process")
        here = str(Path(protocol.__file__).resolve().parents[2])
        if self.hello.get("hcu") != here:  # the child must run this checkout's code, not an installed copy's
            self.kill()
            raise OSWorldCodeError("starting the OSWorld process",
                                   f"it runs hcu from {self.hello.get('hcu')}, not {here}", kind="missing_module")
        if self.hello.get("desktop_env") is None:
            self.kill()
            raise OSWorldCodeError("osworld_python", f"{self.python} cannot import desktop_env (install OSWorld "
                                   "into it, or run `make osworld-venv`)", kind="missing_module")
        if self._context is not None:
            self._last_open = self._request("open", self._context, OPEN_DEADLINE_SEC, "loading OSWorld's code")

    def _start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._answers = queue.Queue()
        with self._starting:  # a shutdown from another thread sees the child, or keeps it from starting
            if self._shut:
                raise OSWorldCodeError(self.what, "the OSWorld process was shut down (the attempt is over)")
            try:
                proc = subprocess.Popen(
                    [str(self.python), "-m", "hcu.osworld.osworld_bridge.child"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.work_dir, env=child_env(),
                    start_new_session=True,  # its own process group: a deadline kills all of it
                )
            except OSError as exc:
                raise OSWorldCodeError("osworld_python", f"{self.python} cannot be started: {exc}",
                                       kind="missing_module") from None
            self._proc = proc
        threading.Thread(target=self._read_answers, args=(proc.stdout, self._answers), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True)
        self._stderr_reader.start()

    def _read_answers(self, stream: IO[bytes], answers: queue.Queue[bytes | None]) -> None:
        for line in stream:
            answers.put(line)
        answers.put(None)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = protocol.mask(raw.decode(errors="replace").rstrip(), self.secret)
            self._stderr_tail.append(line)
            log.info("[%s] %s", self.what, line)

    def _request(self, op: str, args: dict[str, Any], deadline_sec: float, what: str) -> Any:
        assert self._proc is not None and self._proc.stdin is not None
        self._next_id += 1
        try:
            self._proc.stdin.write(protocol.encode(protocol.request(self._next_id, op, args)))
            self._proc.stdin.flush()
            line = self._answers.get(timeout=deadline_sec if deadline_sec > 0 else None)
        except queue.Empty:
            self.kill()
            raise OSWorldCodeError(what, f"exceeded its {deadline_sec:g} s deadline", kind="deadline") from None
        except (BrokenPipeError, OSError):
            line = None
        if line is None:
            self.kill()
            if self._stderr_reader is not None:
                self._stderr_reader.join(5)  # the process is gone: its last words are on their way
            tail = protocol.one_line(" | ".join(list(self._stderr_tail)[-3:]))
            raise OSWorldCodeError(what, f"the OSWorld process ({self.python}) exited; last output: {tail}")
        try:
            answer = protocol.decode(line)
        except protocol.ProtocolError as exc:
            self.kill()
            raise OSWorldCodeError(what, f"the OSWorld process answered out of protocol: {exc}",
                                   kind="protocol") from None
        if answer.get("id") != self._next_id:
            self.kill()
            raise OSWorldCodeError(what, f"answer {answer.get('id')} to request {self._next_id}", kind="protocol")
        if not answer["ok"]:
            error = answer["error"]
            message = protocol.mask(error["message"], self.secret)
            raise OSWorldCodeError(what, message, kind=error["kind"])
        return answer["result"]


def _one_off(osworld_python: Path | None, op: str | None, args: dict[str, Any], what: str) -> dict[str, Any]:
    """Start an OSWorld process, ask one question (or only `hello`), end it."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hcu-osworld-") as work_dir, OSWorldProcess(
        resolve_python(osworld_python), work_dir=Path(work_dir), what=what
    ) as process:
        if op is None:
            process.call("hello", {}, deadline_sec=START_DEADLINE_SEC, what=what)
            return process.hello
        return process.call(op, args, deadline_sec=OPEN_DEADLINE_SEC, what=what)


def osworld_identity(osworld_python: Path | None = None) -> dict[str, Any]:
    """Which interpreter and `desktop_env` the OSWorld process runs, and the checkout folder holding it."""
    hello = _one_off(osworld_python, None, {}, "asking the OSWorld process who it is")
    return {**hello, "checkout_root": str(Path(hello["desktop_env"]).parent)}


def describe_v2_task(task_id: str, tasks_dir: Path | None, osworld_python: Path | None) -> dict[str, Any]:
    """A V2 task class as the OSWorld process loads it (its module runs there, never here)."""
    args = {"task_id": task_id, "tasks_dir": None if tasks_dir is None else str(tasks_dir)}
    return _one_off(osworld_python, "describe_v2", args, "loading the V2 task")


def check_names(metrics: list[str], getters: list[str], osworld_python: Path | None) -> dict[str, Any]:
    """Which of these metric and getter names OSWorld's evaluator packages lack, loaded as `DesktopEnv` loads
    them, and which modules the OSWorld interpreter is missing."""
    return _one_off(osworld_python, "check_names", {"metrics": metrics, "getters": getters},
                    "checking OSWorld's evaluators")
