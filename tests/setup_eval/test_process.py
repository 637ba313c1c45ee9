"""The process boundary: the protocol, the OSWorld process's identity and environment, deadlines that end it
with everything it started, and hcu's own process importing nothing of OSWorld."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from hcu.osworld.osworld_bridge import protocol
from hcu.osworld.osworld_bridge.process import OSWorldCodeError, OSWorldProcess, child_env, osworld_identity

CHILD_PACKAGE = REPO_ROOT / "hcu" / "osworld" / "osworld_bridge" / "child"


def serve_lines(*lines: bytes) -> list[dict]:
    from hcu.osworld.osworld_bridge.child.__main__ import serve

    answers = io.BytesIO()
    serve(io.BytesIO(b"".join(lines)), answers)
    return [protocol.decode(line) for line in answers.getvalue().splitlines()]


def test_requests_and_answers_are_versioned_json_lines() -> None:
    hello, unknown, bad = serve_lines(
        protocol.encode(protocol.request(1, "hello", {})),
        protocol.encode(protocol.request(2, "format_disk", {})),
        b'{"protocol": 99, "id": 3, "op": "hello"}\n',
    )
    assert hello["id"] == 1 and hello["ok"] and hello["result"]["protocol"] == protocol.PROTOCOL_VERSION
    assert (unknown["id"], unknown["ok"], unknown["error"]["kind"]) == (2, False, "protocol")
    assert not bad["ok"] and bad["error"]["message"] == f"expected protocol {protocol.PROTOCOL_VERSION}, got 99"
    with pytest.raises(protocol.ProtocolError, match=f"expected protocol {protocol.PROTOCOL_VERSION}, got 1"):
        protocol.decode(b'{"protocol": 1, "id": 1, "ok": true}')


def test_the_evaluator_venv_runs_desktop_env_1_0_2(evaluator_python: Path) -> None:
    identity = osworld_identity()
    assert identity["python"] == str(evaluator_python)
    assert identity["desktop_env_version"] == "1.0.2"
    assert identity["desktop_env"].startswith(str(evaluator_python.parent.parent))
    # the evaluator venv holds an installed hcu of its own; the OSWorld process runs this checkout's
    assert identity["hcu"] == str(REPO_ROOT / "hcu")


def test_the_osworld_process_gets_none_of_hcus_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSW_ANTHROPIC_UPSTREAM_TOKEN", "sk-secret")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "also-secret")
    monkeypatch.setenv("WEBSITE_HOST_SUFFIX", "web.example.invalid")
    env = child_env()
    assert "sk-secret" not in env.values() and "also-secret" not in env.values()
    assert env["WEBSITE_HOST_SUFFIX"] == "web.example.invalid"  # OSWorld-V2's own service variables pass
    assert env["PYTHONPATH"] == str(REPO_ROOT)


SLOW_SETUP = '''
import subprocess, time

class Task:
    id = "slow"
    instruction = "x"
    config = []

    def setup(self, setup_controller, use_proxy=False):
        subprocess.Popen(["sleep", "600"])  # something OSWorld's code started, outliving nothing
        time.sleep(600)

    def evaluate(self, env):
        return 0.0
'''


def test_a_deadline_kills_the_osworld_process_and_everything_it_started(tmp_path: Path,
                                                                       evaluator_python: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task_slow.py").write_text(SLOW_SETUP)
    process = OSWorldProcess(evaluator_python, work_dir=tmp_path / "w")
    process.open(guest={"host": "127.0.0.1", "api": 9, "cdp": 9, "vnc": 9, "vlc": 9},
                 cache_dir=str(tmp_path / "cache"), client_password="pw", offline=True)
    try:
        pid = process.hello["pid"]
        with pytest.raises(OSWorldCodeError, match="slow setup: exceeded its 2 s deadline") as caught:
            process.call("v2_setup", {"task_id": "slow", "tasks_dir": str(tmp_path / "tasks")}, deadline_sec=2,
                         what="slow setup")
        assert caught.value.kind == "deadline"
        assert not Path(f"/proc/{pid}").exists()
        group = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(pid)], capture_output=True, text=True,
                               timeout=10).stdout.splitlines()
        running = [line for line in group if line.split()[1][0] != "Z"]  # killed, not yet reaped by init: gone
        assert running == [], f"processes of the killed group are still running: {running}"
    finally:
        process.kill()


def test_a_crashed_osworld_process_is_named_with_its_last_output(tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'Fatal Python error: simulated' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(OSWorldCodeError, match="exited; last output: Fatal Python error: simulated"):
        OSWorldProcess(script, work_dir=tmp_path / "w").call("hello", {}, deadline_sec=30, what="x")


HCU_IMPORTS = """
import sys
import hcu.osworld.run_task, hcu.osworld.setup_canary, hcu.osworld.run_queue, hcu.osworld.evaluator_check
import hcu.osworld.attempt.pipeline, hcu.osworld.osworld_bridge.setup, hcu.osworld.osworld_bridge.evaluate
print(sorted({m.split('.')[0] for m in sys.modules} & {'desktop_env', 'torch', 'easyocr', 'mm_agents', 'dotenv'}))
"""


def test_hcus_process_imports_nothing_of_osworld() -> None:
    out = subprocess.run([sys.executable, "-c", HCU_IMPORTS], capture_output=True, text=True, timeout=120,
                         cwd=REPO_ROOT, check=True).stdout
    assert out.strip() == "[]"
    importers = []
    for source in (REPO_ROOT / "hcu").rglob("*.py"):
        if CHILD_PACKAGE in source.parents:
            continue
        for node in ast.walk(ast.parse(source.read_bytes())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            importers += [f"{source}: {n}" for n in names if n.split(".")[0] == "desktop_env"]
    assert importers == []


OSWORLD_DEPENDENCIES = {"requests", "openpyxl", "docx", "pptx", "odf", "fitz", "pymupdf", "PIL", "cv2", "numpy",
                        "soundfile", "mutagen"}
"""What OSWorld's own controllers and evaluators import (to read office files, images and media), so every OSWorld
interpreter has them; the child's stand-in files are written with them (read by the same libraries)."""


def test_the_child_code_runs_on_the_standard_library_alone() -> None:
    """Whatever OSWorld interpreter runs it (a checkout's venv has none of hcu's dependencies): the standard
    library and OSWorld's own dependencies only."""
    allowed = set(sys.stdlib_module_names) | {"hcu", "desktop_env"} | OSWORLD_DEPENDENCIES
    for source in CHILD_PACKAGE.glob("*.py"):
        tree = ast.parse(source.read_bytes())
        optional = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and _catches_import_error(t)
                    for stmt in t.body for n in ast.walk(stmt)}  # `try: import x / except ImportError`
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(tops) <= allowed, f"{source.name} imports {tops}"
    for shared in (CHILD_PACKAGE.parent / "protocol.py", REPO_ROOT / "hcu" / "osworld" / "errors.py"):
        source = ast.parse(shared.read_bytes())
        modules = [a.name for n in ast.walk(source) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module for n in ast.walk(source) if isinstance(n, ast.ImportFrom)]
        assert set(modules) <= set(sys.stdlib_module_names) | {"__future__", "hcu.osworld.errors"}, modules


def test_starting_the_child_loads_no_dependency_of_hcus() -> None:
    """`hcu/__init__` and the bridge package are what the child loads before its own modules."""
    code = ("import sys, hcu.osworld.osworld_bridge.child.__main__; "
            "print(sorted({k.split('.')[0] for k in sys.modules} & {'pydantic', 'orjson', 'requests', 'desktop_env'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _catches_import_error(node: ast.Try) -> bool:
    names = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
    return bool(names & {"ImportError", "ModuleNotFoundError", "(ImportError, ModuleNotFoundError)"})
