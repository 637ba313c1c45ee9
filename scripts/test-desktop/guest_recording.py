"""Screen recording of the in-guest server (/start_recording, /end_recording): ffmpeg x11grab of the whole
screen to one MP4, with the official server's answers. One recording at a time, as there.

Written from the documented behaviour: start answers an error when a recording runs or ffmpeg exits within
2 s; end asks ffmpeg to quit ('q' on stdin, so the MP4 is finalised), waits up to 15 s, and sends the file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any

from flask import jsonify, send_file

RECORDING_PATH = os.path.join(tempfile.gettempdir(), "osworld_recording.mp4")
START_CHECK_S = 2
STOP_WAIT_S = 15

_lock = threading.Lock()
_process: subprocess.Popen[str] | None = None


def _command(width: int, height: int) -> list[str]:
    ffmpeg = shutil.which("ffmpeg")
    if not ffmpeg:
        raise RuntimeError("ffmpeg is required for recording but was not found in PATH.")
    return [ffmpeg, "-y", "-f", "x11grab", "-draw_mouse", "1", "-s", f"{width}x{height}",
            "-i", os.environ.get("DISPLAY", ":0") + ".0", "-c:v", "libx264", "-r", "30", RECORDING_PATH]


def _error(message: str, status: int) -> tuple[Any, int]:
    return jsonify({"status": "error", "message": message}), status


def start(screen_size: tuple[int, int]) -> Any:
    global _process
    with _lock:
        if _process is not None and _process.poll() is None:
            return _error("Recording is already in progress.", 400)
        try:
            if os.path.exists(RECORDING_PATH):
                os.remove(RECORDING_PATH)
            _process = subprocess.Popen(_command(*screen_size), stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except (OSError, RuntimeError) as exc:
            return _error(str(exc), 500)
        try:
            _process.wait(timeout=START_CHECK_S)
        except subprocess.TimeoutExpired:
            return jsonify({"status": "success", "message": "Started recording successfully."})
        stderr = _process.stderr.read() if _process.stderr else ""
        return _error(f"Failed to start recording. ffmpeg terminated unexpectedly. Error: {stderr}", 500)


def end() -> Any:
    global _process
    with _lock:
        process, _process = _process, None
        if process is None or process.poll() is not None:
            return _error("No recording in progress to stop.", 400)
        try:
            _, stderr = process.communicate("q\n", timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            return _error(f"Recording process was unresponsive and had to be killed. Stderr: {stderr}", 500)
        if os.path.exists(RECORDING_PATH) and os.path.getsize(RECORDING_PATH) > 0:
            return send_file(RECORDING_PATH, as_attachment=True)
        return _error(f"Recording failed. The output file is missing or empty. ffmpeg stderr: {stderr}", 500)
