"""Stand-in task files in the asset cache: every URL a task's setup, postconfig or getters would fetch gets a
generated file of the right type (child/stand_in_files.py makes it, in the OSWorld process, whose libraries
read such files in the evaluator too). For offline tests only: the cache is a stand-in cache (assets.py), and
whatever runs on it is marked.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from hcu.osworld.osworld_bridge.assets import AssetCache, AssetError, cache_path, is_url
from hcu.osworld.osworld_bridge.process import OSWorldCodeError, OSWorldProcess
from hcu.osworld.osworld_bridge.setup import BROWSE_HISTORY_URL
from hcu.osworld.tasks import TaskDefinition

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


def expected_files(task: TaskDefinition) -> set[str]:
    """The URLs only the evaluator fetches, as the gold its metric compares with (an expected getter's file or
    one postconfig downloads after the agent), never the task's input: setup and the result getters fetch none
    of them. Their stand-ins hold a finished task's work (child/stand_in_gold.py)."""
    evaluator = task.evaluator or {}
    inputs = {url for step in task.config for url, _ in _step_files(step)}
    golds = {url for step in evaluator.get("postconfig", []) for url, _ in _step_files(step)}
    for key, found in (("result", inputs), ("expected", golds)):
        configs = evaluator.get(key)
        found.update(url for config in (configs if isinstance(configs, list) else [configs])
                     for url, _ in _getter_files(config))
    return golds - inputs


def provide(process: OSWorldProcess, task: TaskDefinition, assets: AssetCache) -> list[str]:
    """Generate the stand-ins the cache lacks for `task`; returns the URLs made now."""
    if not assets.stand_ins:
        raise AssetError(f"asset cache {assets.root} is not a stand-in cache: no stand-in is written into it")
    made = []
    golds = expected_files(task)
    for url, names in task_files(task).items():
        target = cache_path(assets.root, url)
        if target.is_file():
            continue
        role = "expected" if url in golds else "input"
        try:
            process.call("stand_in", {"url": url, "names": names, "target": str(target), "role": role},
                         deadline_sec=DEADLINE_SEC, what=f"making a stand-in for {url}")
        except OSWorldCodeError as exc:
            raise AssetError(str(exc)) from None
        made.append(url)
    return made
