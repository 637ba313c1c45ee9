"""In-guest HTTP API of the hcu test desktop, on 0.0.0.0:5000.

Written from the documented request/response shapes of OSWorld's in-guest server (osworld_server
.service on the official guest) so that a client cannot tell the two guests apart. Deliberate
differences: no X-connection leak, no shared screenshot file, /run_bash_script does not fail after
running, /setup/open_file waits at most OPEN_FILE_TIMEOUT_S.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import guest_recording
from flask import Flask, Response, jsonify, request, send_file
from guest_screen import Screen

EXECUTE_TIMEOUT_S = 120
RUN_PYTHON_TIMEOUT_S = 30
OPEN_FILE_TIMEOUT_S = float(os.environ.get("HCU_OPEN_FILE_TIMEOUT_S", "120"))

app = Flask(__name__)
screen = Screen()


class LazyAx:
    """The AT-SPI side (module guest_ax and its worker thread), loaded on first use: pyatspi and lxml
    take a good part of the server's start time, and the API must answer as early as possible."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._module: Any = None
        self._worker: Any = None

    def load(self) -> None:
        with self._lock:
            if self._module is None:
                import guest_ax

                self._module, self._worker = guest_ax, guest_ax.AxWorker()

    def call(self, function_name: str) -> Any:
        """guest_ax.<function_name>() run on the AT-SPI thread."""
        self.load()
        return self._worker.call(getattr(self._module, function_name))


ax = LazyAx()


def _command_from(data: dict[str, Any]) -> tuple[list[str] | str, bool]:
    """The command of an /execute-style body: a string without shell is shlex-split, ~/ expanded."""
    shell = bool(data.get("shell", False))
    command = data.get("command", "" if shell else [])
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if isinstance(command, list):
        command = [os.path.expanduser(arg) if isinstance(arg, str) and arg.startswith("~/") else arg
                   for arg in command]
    return command, shell


def _run(command: list[str] | str, shell: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=shell, capture_output=True, text=True, timeout=EXECUTE_TIMEOUT_S)


def _result(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return {"status": "success", "output": result.stdout, "error": result.stderr,
            "returncode": result.returncode}


def _error(exc: Exception, status: int = 500) -> tuple[Response, int]:
    return jsonify({"status": "error", "message": str(exc)}), status


def _user_path(raw: str) -> str:
    return os.path.expandvars(os.path.expanduser(raw))


@app.post("/setup/execute")
@app.post("/execute")
def execute() -> Any:
    try:
        return jsonify(_result(_run(*_command_from(request.get_json()))))
    except Exception as exc:
        return _error(exc)


def _verified(verification: dict[str, Any]) -> bool:
    if "window_exists" in verification:
        listing = subprocess.run(["wmctrl", "-l"], capture_output=True, text=True, timeout=10)
        if str(verification["window_exists"]).lower() not in listing.stdout.lower():
            return False
    if "command_success" in verification:
        check = subprocess.run(verification["command_success"], shell=True, capture_output=True, timeout=5)
        if check.returncode != 0:
            return False
    return True


@app.post("/setup/execute_with_verification")
@app.post("/execute_with_verification")
def execute_with_verification() -> Any:
    data = request.get_json()
    verification = data.get("verification") or {}
    max_wait = float(data.get("max_wait_time", 10))
    interval = float(data.get("check_interval", 1))
    try:
        body = _result(_run(*_command_from(data)))
        if not verification:
            return jsonify(body)
        start = time.monotonic()
        while time.monotonic() - start < max_wait:
            if _verified(verification):
                return jsonify({**body, "verification": "passed", "wait_time": time.monotonic() - start})
            time.sleep(interval)
        return jsonify({**body, "status": "verification_failed", "verification": "failed",
                        "wait_time": max_wait}), 500
    except Exception as exc:
        return _error(exc)


def _spawn(command: list[str] | str, shell: bool = False) -> None:
    """Start a process without waiting; a reaper thread collects its exit status (no zombies)."""
    process = subprocess.Popen(command, shell=shell)
    threading.Thread(target=process.wait, daemon=True).start()


@app.post("/setup/launch")
def launch() -> Any:
    command, shell = _command_from(request.get_json())
    try:
        _spawn(command, shell)
    except Exception as exc:
        return _error(exc)
    shown = command if shell or isinstance(command, str) else " ".join(command)
    return f"{shown} launched successfully"


@app.get("/screenshot")
def screenshot() -> Any:
    return Response(screen.screenshot_png(), mimetype="image/png")


@app.get("/terminal")
def terminal() -> Any:
    try:
        return jsonify({"output": ax.call("terminal_text"), "status": "success"})
    except Exception as exc:
        return _error(exc)


@app.get("/accessibility")
def accessibility() -> Any:
    return jsonify({"AT": ax.call("accessibility_xml")})


@app.post("/screen_size")
def screen_size() -> Any:
    width, height = screen.size()
    return jsonify({"width": width, "height": height})


@app.post("/window_size")
def window_size() -> Any:
    if "app_class_name" not in request.form:
        return jsonify({"error": "app_class_name is required"}), 400
    size = screen.window_size(request.form["app_class_name"])
    if size is None:
        return jsonify({"error": "window not found"}), 500
    return jsonify({"width": size[0], "height": size[1]})


@app.post("/desktop_path")
def desktop_path() -> Any:
    path = os.path.join(str(Path.home()), "Desktop")
    if os.path.exists(path):
        return jsonify(desktop_path=path)
    return jsonify(error="Unsupported operating system or desktop path not found"), 404


@app.post("/wallpaper")
def wallpaper() -> Any:
    uri = subprocess.run(["gsettings", "get", "org.gnome.desktop.background", "picture-uri"],
                         capture_output=True, text=True, timeout=10).stdout
    path = uri.strip().replace("file://", "").replace("'", "")
    if path and os.path.isfile(path):
        return send_file(path, mimetype="image/png")
    return jsonify({"error": "Wallpaper file not found"}), 404


def _directory_tree(directory: str) -> dict[str, Any]:
    try:
        children = []
        for entry in os.listdir(directory):
            full = os.path.join(directory, entry)
            children.append(_directory_tree(full) if os.path.isdir(full) else {"type": "file", "name": entry})
    except OSError as exc:
        return {"error": str(exc)}
    return {"type": "directory", "name": os.path.basename(directory), "children": children}


@app.post("/list_directory")
def list_directory() -> Any:
    data = request.get_json()
    if "path" not in data:
        return jsonify(error="Missing 'path' parameter"), 400
    if not os.path.isdir(data["path"]):
        return jsonify(error="The provided path is not a directory"), 400
    return jsonify(directory_tree=_directory_tree(data["path"]))


@app.post("/file")
def get_file() -> Any:
    if "file_path" not in request.form:
        return jsonify({"error": "file_path is required"}), 400
    path = _user_path(request.form["file_path"])
    if not os.path.isfile(path):
        return jsonify({"error": "File not found"}), 404
    return send_file(path, as_attachment=True)


@app.post("/setup/upload")
def upload() -> Any:
    if "file_path" not in request.form or "file_data" not in request.files:
        return jsonify({"error": "file_path and file_data are required"}), 400
    path = _user_path(request.form["file_path"])
    try:
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        request.files["file_data"].save(path)
    except OSError as exc:
        return jsonify({"error": f"Failed to upload file: {exc}"}), 500
    return f"File Uploaded: {os.path.getsize(path)} bytes"


@app.get("/platform")
def get_platform() -> Any:
    return platform.system()


@app.get("/cursor_position")
def cursor_position() -> Any:
    return jsonify(list(screen.cursor_position()))


def _activate_matching_window(names: tuple[str, ...]) -> bool:
    listing = subprocess.run(["wmctrl", "-l"], capture_output=True, text=True, timeout=10).stdout
    for line in listing.splitlines():
        if any(name in line for name in names):
            subprocess.run(["wmctrl", "-i", "-a", line.split()[0]], timeout=10)
            return True
    return False


@app.post("/setup/open_file")
def open_file() -> Any:
    raw = request.get_json().get("path")
    if not raw:
        return "Path not supplied!", 400
    path = Path(_user_path(raw))
    if not path.exists() and not shutil.which(raw):
        return f"Application/file not found: {raw}", 404
    try:
        if path.exists():
            _spawn(["xdg-open", str(path)])
            names = (path.name, path.stem)
        else:
            _spawn([raw])
            names = (raw,)
        deadline = time.monotonic() + OPEN_FILE_TIMEOUT_S
        while time.monotonic() < deadline:
            if _activate_matching_window(names):
                return "File opened and window activated successfully"
            time.sleep(0.5)
    except Exception as exc:
        return f"Failed to open {path}. Error: {exc}", 500
    return f"Failed to find window for {names[0]} within {OPEN_FILE_TIMEOUT_S:g} seconds.", 500


def _wmctrl_flag(data: dict[str, Any], action: str) -> str:
    return "-{}{}{}".format("x" if data.get("by_class") else "", "F" if data.get("strict") else "", action)


@app.post("/setup/activate_window")
def activate_window() -> Any:
    data = request.get_json()
    if not data.get("window_name"):
        return "window_name required", 400
    subprocess.run(["wmctrl", _wmctrl_flag(data, "a"), data["window_name"]], timeout=30)
    return "Window activated successfully", 200


@app.post("/setup/close_window")
def close_window() -> Any:
    data = request.get_json()
    if "window_name" not in data:
        return "window_name required", 400
    subprocess.run(["wmctrl", _wmctrl_flag(data, "c"), data["window_name"]], timeout=30)
    return "Window closed successfully.", 200


@app.post("/start_recording")
def start_recording() -> Any:
    return guest_recording.start(screen.size())


@app.post("/end_recording")
def end_recording() -> Any:
    return guest_recording.end()


@app.post("/run_python")
def run_python() -> Any:
    code = request.get_json().get("code")
    if not code:
        return jsonify({"status": "error", "message": "Code not supplied!"}), 400
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="python_exec_", delete=False) as script:
        script.write(code)
    try:
        result = subprocess.run(["/usr/bin/python3", script.name], capture_output=True, text=True,
                                timeout=RUN_PYTHON_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return jsonify({"status": "error", "message": "Execution timeout: Code took too long to execute",
                        "error": "TimeoutExpired", "need_more": False, "output": None}), 500
    except Exception as exc:
        return jsonify({"status": "error", "message": f"Execution error: {exc}",
                        "error": traceback.format_exc(), "need_more": False, "output": None}), 500
    finally:
        os.unlink(script.name)
    error = result.stderr or (f"Process exited with code {result.returncode}" if result.returncode else "")
    message = "\n".join(part for part in (result.stdout, error) if part)
    return jsonify({"status": "success" if result.returncode == 0 else "error", "message": message,
                    "need_more": False, "output": result.stdout, "error": error,
                    "return_code": result.returncode})


def _bash_result(status: str, output: str, returncode: int, http_status: int = 200) -> tuple[Response, int]:
    return jsonify({"status": status, "output": output, "error": "", "returncode": returncode}), http_status


@app.post("/run_bash_script")
def run_bash_script() -> Any:
    data = request.get_json()
    script, timeout = data.get("script"), data.get("timeout", 100)
    working_dir = os.path.expanduser(data["working_dir"]) if data.get("working_dir") else None
    if not script:
        return _bash_result("error", "Script not supplied!", -1, 400)
    if working_dir and not os.path.exists(working_dir):
        return _bash_result("error", f"Working directory does not exist: {working_dir}", -1, 400)
    if "#!/bin/bash" not in script:
        script = "#!/bin/bash\n\n" + script
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as file:
        file.write(script)
    try:
        result = subprocess.run(["/bin/bash", file.name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=timeout, cwd=working_dir)
    except subprocess.TimeoutExpired:
        return _bash_result("error", f"Script execution timed out after {timeout} seconds", -1, 500)
    except Exception as exc:
        return _bash_result("error", f"Failed to execute script: {exc}", -1, 500)
    finally:
        os.unlink(file.name)
    return _bash_result("success" if result.returncode == 0 else "error", result.stdout, result.returncode)


if __name__ == "__main__":
    threading.Thread(target=ax.load, name="ax-warm-up", daemon=True).start()  # ready before the first AX call
    app.run(host="0.0.0.0", port=5000, threaded=True)
