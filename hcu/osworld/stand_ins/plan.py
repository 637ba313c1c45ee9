"""Which stand-ins a task needs: every URL its setup, postconfig or getters would fetch, with the names it lands
under, what an archive must hold, and which files are the gold an evaluator compares with (files.py makes each).
"""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from hcu.defaults import GUEST
from hcu.osworld.osworld_bridge.assets import cache_path, is_url
from hcu.osworld.osworld_bridge.setup import BROWSE_HISTORY_URL
from hcu.osworld.osworld_bridge.tasks import TaskDefinition

DEADLINE_SEC = 120.0


def _getter_files(config: Any) -> list[tuple[str, str]]:
    if not isinstance(config, dict) or config.get("type") != "cloud_file":
        return []
    paths = config["path"] if config.get("multi") else [config.get("path")]
    dests = config["dest"] if config.get("multi") else [config.get("dest")]
    return [(str(p), str(d or "")) for p, d in zip(paths, dests, strict=False) if isinstance(p, str) and is_url(p)]


def _step_files(step: dict[str, Any]) -> list[tuple[str, str]]:
    parameters = step.get("parameters") or {}
    if step.get("type") == "download":
        return [(f["url"], PurePosixPath(f.get("path") or "").name) for f in parameters.get("files", [])
                if is_url(f.get("url", ""))]
    if step.get("type") == "update_browse_history":
        return [(BROWSE_HISTORY_URL, "history_new.sqlite")]
    return []


def task_files(task: TaskDefinition) -> dict[str, list[str]]:
    """Every URL the task makes OSWorld fetch, with the file names it lands under (first first)."""
    found: dict[str, list[str]] = {}
    evaluator = task.evaluator or {}
    pairs = [pair for step in task.config for pair in _step_files(step)]
    pairs += [pair for step in evaluator.get("postconfig", []) for pair in _step_files(step)]
    for key in ("result", "expected"):
        configs = evaluator.get(key)
        for config in configs if isinstance(configs, list) else [configs]:
            pairs += _getter_files(config)
    for url, name in pairs:
        names = found.setdefault(url, [])
        if name and name not in names:
            names.append(name)
    return found


ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
ARCHIVE_FILE_TYPES = {"pdf": ".pdf", "docx": ".docx", "ppt": ".pptx", "image": ".png", "csv": ".csv",
                      "text": ".txt", "table": ".xlsx", "xlsx": ".xlsx", "audio": ".mp3", "video": ".mp4"}
"""`compare_archive`'s file types, as the suffix of a file of that type."""


def archive_members(task: TaskDefinition) -> dict[str, list[str]]:
    """What each archive the task fetches must hold, from what the task names (paths inside the archive; a
    folder ends with "/"): for an archive setup downloads, the paths the setup steps name under the folder it
    is unpacked into (`unzip -d`, `tar -C`, else its own folder), those downloaded on their own left out;
    for the archive `compare_archive` expects, one file of its `file_type` in its `file_path` folder."""
    found: dict[str, list[str]] = {}
    downloads = {str(f.get("path")): f["url"] for step in task.config if step.get("type") == "download"
                 for f in (step.get("parameters") or {}).get("files", []) if is_url(f.get("url", ""))}
    named = [word for step in task.config for word in _words(step.get("parameters"))]
    for landing, url in downloads.items():
        if not landing.lower().endswith(ARCHIVES):
            continue
        folder = _unpacked_into(task.config, landing)
        members = []
        for word in named:
            inside = word.rstrip("/")
            if word in downloads or word == landing or not inside.startswith(folder + "/"):
                continue
            member = inside[len(folder) + 1:] + ("/" if word.endswith("/") or not PurePosixPath(inside).suffix
                                                  else "")
            if member not in members:
                members.append(member)
        if members:
            found[url] = members
    evaluator = task.evaluator or {}
    expected = evaluator.get("expected")
    if evaluator.get("func") == "compare_archive" and isinstance(expected, dict) and _getter_files(expected):
        options = evaluator.get("options") or {}
        url = _getter_files(expected)[0][0]
        stem = PurePosixPath(url.split("?")[0]).name.split(".")[0] or "stand-in"
        suffix = ARCHIVE_FILE_TYPES.get(str(options.get("file_type", "text")), ".txt")
        found[url] = [str(PurePosixPath(str(options.get("file_path") or "."), stem + suffix))]
    return found


def _tokens(value: Any) -> list[str]:
    """Every word of a step's parameters (strings with spaces split as a shell would)."""
    if isinstance(value, dict):
        return [word for item in value.values() for word in _tokens(item)]
    if isinstance(value, list):
        return [word for item in value for word in _tokens(item)]
    if not isinstance(value, str):
        return []
    if " " not in value or value.startswith("/"):  # a path may hold spaces
        return [value]
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _words(value: Any) -> list[str]:
    """The absolute paths a step's parameters name (`~/` is the user's home)."""
    words = [GUEST.home + word[1:] if word.startswith("~/") else word for word in _tokens(value)]
    return [word for word in words if word.startswith("/") and not set(word) & set("'\"$`()*?;|&<>")]


def _unpacked_into(steps: list[dict[str, Any]], archive: str) -> str:
    """The folder a setup command unpacks `archive` into (`-d`, `-C`), else the archive's own folder."""
    for step in steps:
        words = _tokens((step.get("parameters") or {}).get("command"))
        if archive not in words:
            continue
        for flag in ("-d", "-C", "--directory"):
            if flag in words[:-1]:
                return words[words.index(flag) + 1].rstrip("/") or "/"
    return str(PurePosixPath(archive).parent)


def expected_files(task: TaskDefinition) -> set[str]:
    """The URLs only the evaluator fetches, as the gold its metric compares with (an expected getter's file or
    one postconfig downloads after the agent), never the task's input: setup and the result getters fetch none
    of them. Their stand-ins hold a finished task's work (gold.py)."""
    evaluator = task.evaluator or {}
    inputs = {url for step in task.config for url, _ in _step_files(step)}
    golds = {url for step in evaluator.get("postconfig", []) for url, _ in _step_files(step)}
    for key, found in (("result", inputs), ("expected", golds)):
        configs = evaluator.get(key)
        found.update(url for config in (configs if isinstance(configs, list) else [configs])
                     for url, _ in _getter_files(config))
    return golds - inputs


def missing(task: TaskDefinition, root: Path) -> list[dict[str, Any]]:
    """What generate.py must make for `task` in the stand-in cache at `root`: one job per file not there yet."""
    members, golds = archive_members(task), expected_files(task)
    return [{"url": url, "names": names, "target": str(target), "members": members.get(url, []),
             "role": "expected" if url in golds else "input"}
            for url, names in task_files(task).items() if not (target := cache_path(root, url)).is_file()]
