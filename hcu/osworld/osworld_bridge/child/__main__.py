"""python -m hcu.osworld.osworld_bridge.child: the OSWorld process. Reads protocol requests on stdin, answers
on stdout; everything OSWorld prints or logs goes to stderr, which hcu reads with the password masked.

Runs in the OSWorld interpreter (the evaluator venv, or an OSWorld checkout's), with only the standard library
and what OSWorld itself imports; hcu puts this repository first on its PYTHONPATH.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from hcu.osworld.osworld_bridge import protocol
from hcu.osworld.osworld_bridge.child import v1, v2
from hcu.osworld.osworld_bridge.child.guest_traffic import Watch
from hcu.osworld.osworld_bridge.child.offline import RefusingProxy

ROOT_ENV = "OSWORLD_V2_ROOT"
"""A checkout to import `desktop_env` from instead of the interpreter's own (the reference's variable)."""


class Session:
    """What one OSWorld process holds between requests: the guest context, its env, a loaded V2 task."""

    def __init__(self) -> None:
        self.ctx: v1.GuestContext | None = None
        self.env: Any = None
        self.proxy: RefusingProxy | None = None
        self.v2_task: Any = None
        self.v2_path: Path | None = None
        self.watch: Watch | None = None

    @property
    def password(self) -> str:
        return self.ctx.client_password if self.ctx else ""

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        request_id, op, args = request.get("id", -1), request.get("op"), request.get("args") or {}
        handler = getattr(self, f"op_{op}", None) if op in protocol.OPS else None
        if handler is None:
            return protocol.failure(request_id, "protocol", f"unknown op {op!r}")
        try:
            return protocol.success(request_id, handler(**args))
        except v1.Failure as exc:
            kind, message = exc.kind, str(exc)
        except ImportError as exc:
            kind, message = "missing_module", f"{type(exc).__name__}: {exc} (in {sys.executable})"
        except Exception as exc:  # noqa: BLE001 - OSWorld raises bare Exception; reported, never a score
            kind, message = ("step_failed" if op in ("setup_step", "v2_setup") else "exception",
                             f"{type(exc).__name__}: {exc}")
        refused = self.proxy.take_refused() if self.proxy else []
        if refused:
            message += f" (refused: {', '.join(dict.fromkeys(refused))})"
        return protocol.failure(request_id, kind, protocol.mask(message, self.password))

    def op_hello(self) -> dict[str, Any]:
        import importlib.util

        spec = importlib.util.find_spec("desktop_env")
        found = spec is not None and bool(spec.submodule_search_locations)
        package = str(Path(next(iter(spec.submodule_search_locations))).resolve()) if found else None
        return {"protocol": protocol.PROTOCOL_VERSION, "python": sys.executable,
                "python_version": ".".join(map(str, sys.version_info[:3])), "desktop_env": package,
                "desktop_env_version": v1.desktop_env_version() if found else None, "pid": os.getpid(),
                "hcu": str(Path(protocol.__file__).resolve().parents[2])}

    def op_open(self, guest: dict[str, Any], cache_dir: str, client_password: str, offline: bool) -> dict:
        quiet_telemetry()  # before the offline proxy: its refusals must name fetches of the task's, not this
        self.ctx = v1.GuestContext(cache_dir=cache_dir, client_password=client_password, **guest)
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        if offline:
            self.proxy = self.proxy or RefusingProxy()
            self.proxy.install([self.ctx.host])
        elif self.proxy is not None:
            self.proxy.uninstall()
        self.env = v1.build_env(self.ctx)
        self.watch = Watch(self.ctx.host, client_password)
        return {"offline_proxy": self.proxy.url if self.proxy else None}

    def _env(self) -> Any:
        if self.env is None:
            raise v1.Failure("protocol", "no guest: send `open` first")
        return self.env

    def _refused(self) -> list[str]:
        return self.proxy.take_refused() if self.proxy else []

    def op_setup_step(self, step: dict[str, Any]) -> dict[str, Any]:
        env = self._env()
        assert self.watch is not None
        answers = v1.run_setup_step(env, step, self.watch)
        return {"refused": self._refused(), "answers": answers}

    def op_evaluate(self, task: dict[str, Any], last_action: str | None) -> dict[str, Any]:
        env = self._env()
        assert self.watch is not None
        return {**v1.evaluate(env, task, last_action, self.watch), "refused": self._refused()}

    def op_check_names(self, metrics: list[str], getters: list[str]) -> dict[str, Any]:
        return v1.check_names(metrics, getters)

    def _v2(self, task_id: str, tasks_dir: str | None) -> Any:
        path = v2.find_task_file(task_id, tasks_dir)
        if self.v2_path != path:
            self.v2_task, self.v2_path = v2.load_task_object(path), path
        return self.v2_task

    def op_describe_v2(self, task_id: str, tasks_dir: str | None) -> dict[str, Any]:
        task = self._v2(task_id, tasks_dir)
        assert self.v2_path is not None
        return v2.describe(self.v2_path, task)

    def op_v2_setup(self, task_id: str, tasks_dir: str | None) -> dict[str, Any]:
        task, env = self._v2(task_id, tasks_dir), self._env()
        v2.prepare_env(env, task)
        v2.run_setup(task, env)
        return {"refused": self._refused()}

    def op_v2_evaluate(self, task_id: str, tasks_dir: str | None, last_action: str | None) -> dict[str, Any]:
        task, env = self._v2(task_id, tasks_dir), self._env()
        v2.prepare_env(env, task)
        return {**v2.run_evaluate(task, env, last_action), "refused": self._refused()}


def quiet_telemetry() -> None:
    """onnxruntime (imported by OSWorld's metrics through PyMuPDF) sends usage events to Microsoft on its own;
    offline they are refused, and the refusal would read as a fetch the task attempted."""
    try:
        import onnxruntime
    except ImportError:
        return
    if hasattr(onnxruntime, "disable_telemetry_events"):
        onnxruntime.disable_telemetry_events()


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    session = Session()
    for line in requests:
        if not line.strip():
            continue
        try:
            message = protocol.decode(line)
        except protocol.ProtocolError as exc:
            answers.write(protocol.encode(protocol.failure(-1, "protocol", str(exc))))
            continue
        answers.write(protocol.encode(session.handle(message)))
        answers.flush()


def main() -> None:
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # OSWorld and the libraries under it print: only answers may reach the protocol stream
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    root = os.environ.get(ROOT_ENV)
    if root:
        sys.path.insert(0, str(Path(root).expanduser().resolve()))
    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
