"""Which files of a run directory the viewer may hand out, and how a requested path is checked.

A request names a path relative to the run directory. It is refused when it is absolute, holds a `..`, an
empty or hidden-cache segment, a backslash or a NUL, when it resolves (symlinks followed) outside the run
directory, or when its kind is not one the pages show (images, video, text records). Key files are never
served, whatever they are called inside.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from hcu.osworld.errors import HcuOSWorldError

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
               ".gif": "image/gif"}
VIDEO_TYPES = {".mp4": "video/mp4", ".webm": "video/webm"}
TEXT_TYPES = {".json": "application/json", ".jsonl": "application/x-ndjson", ".log": "text/plain",
              ".txt": "text/plain", ".md": "text/markdown", ".csv": "text/csv"}
"""Text is served through the redactor (`redact.py`), never as stored."""
CONTENT_TYPES = {**IMAGE_TYPES, **VIDEO_TYPES, **TEXT_TYPES}
REFUSED_NAMES = frozenset({"gateway-scope.key"})
REFUSED_SUFFIXES = frozenset({".key", ".pem"})
REFUSED_DIRS = frozenset({".osworld-cache", ".osworld-process"})
"""OSWorld's per-task caches: task files and a process's scratch space, nothing a page links to."""


class PathRefused(HcuOSWorldError, ValueError):
    """A requested path is not a file of the run directory the viewer serves; the message says why."""


def is_text(path: Path | PurePosixPath) -> bool:
    return path.suffix.lower() in TEXT_TYPES


def content_type(path: Path | PurePosixPath) -> str:
    return CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")


def check_relative(relative: str) -> PurePosixPath:
    """The path's parts checked without touching the disk."""
    if not relative or "\\" in relative or "\0" in relative:
        raise PathRefused("empty path, backslash or NUL")
    path = PurePosixPath(relative)
    if path.is_absolute() or relative.startswith("/"):
        raise PathRefused("absolute path")
    if any(part in ("", ".", "..") for part in relative.split("/")):
        raise PathRefused("'..', '.' or an empty segment")
    if any(part in REFUSED_DIRS for part in path.parts):
        raise PathRefused("an OSWorld cache folder")
    if path.name in REFUSED_NAMES or path.suffix.lower() in REFUSED_SUFFIXES:
        raise PathRefused("a key file")
    if path.suffix.lower() not in CONTENT_TYPES:
        raise PathRefused(f"not a kind of file the viewer shows ({path.suffix or 'no suffix'})")
    return path


def resolve_in_run(run_dir: Path, relative: str) -> Path:
    """The file `relative` names inside `run_dir`, symlinks resolved; PathRefused when it is not one to serve."""
    checked = check_relative(relative)
    root = run_dir.resolve()
    target = (root / checked).resolve()
    if not target.is_relative_to(root):
        raise PathRefused("outside the run directory")
    if target.name in REFUSED_NAMES or target.suffix.lower() in REFUSED_SUFFIXES:
        raise PathRefused("a key file")  # a link inside the run that points at its key
    if not target.is_file():
        raise PathRefused("no such file")
    return target


def join_inside(folder: str, relative: str) -> str | None:
    """`folder/relative` as a run-relative path, or None when `relative` (from a record: a trajectory's
    screenshot, say) would leave `folder`."""
    try:
        check_relative(f"{folder}/{relative}")
    except PathRefused:
        return None
    return f"{folder}/{relative}"
