"""python -m hcu.osworld.evaluator_check: can the OSWorld process score every task of a task index?

For each task in the index (default `<tasks dir>/test_all.json`), the metrics and getters its evaluator names
are looked up in the OSWorld process, loading OSWorld's evaluator packages the way `DesktopEnv` does. Prints
a per-domain table, the missing functions with the tasks that need them, and the modules the OSWorld
interpreter lacks. Exit status: 0 when the check ran, 1 when the OSWorld process could not, 2 bad flags.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from hcu.flags import OneLineParser
from hcu.osworld.osworld_bridge.evaluate import evaluator_names
from hcu.osworld.osworld_bridge.process import OSWorldCodeError, check_names
from hcu.osworld.osworld_bridge.tasks import TaskError, default_v1_tasks_dir


def read_index(tasks_dir: Path, index: Path) -> dict[str, dict[str, Any]]:
    """{task id: {"domain", "metrics", "getters", "error"}} for every task the index lists."""
    try:
        listed = orjson.loads(index.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TaskError(f"--index: {index} is not a readable task index ({exc})") from None
    examples = tasks_dir / "examples" if (tasks_dir / "examples").is_dir() else tasks_dir
    tasks: dict[str, dict[str, Any]] = {}
    for domain, ids in listed.items():
        for task_id in ids:
            entry: dict[str, Any] = {"domain": domain, "metrics": [], "getters": [], "error": None}
            path = examples / domain / f"{task_id}.json"
            try:
                entry["metrics"], entry["getters"] = evaluator_names(orjson.loads(path.read_bytes())["evaluator"])
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
                entry["error"] = f"{path}: {type(exc).__name__}: {exc}"
            tasks[task_id] = entry
    return tasks


def report(tasks: dict[str, dict[str, Any]], answer: dict[str, Any]) -> tuple[str, int]:
    """The printed table and the number of tasks whose every name loads."""
    missing: dict[str, str] = answer["missing"]
    broken = answer["import_error"]
    by_domain: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    needed_by: dict[str, list[str]] = defaultdict(list)
    for task_id, entry in tasks.items():
        names = [*entry["metrics"], *entry["getters"]]
        for name in dict.fromkeys(names):
            if name in missing:
                needed_by[name].append(f"{entry['domain']}/{task_id[:8]}")
        ok = not broken and entry["error"] is None and not any(name in missing for name in names)
        by_domain[entry["domain"]][0] += 1
        by_domain[entry["domain"]][1] += ok
    loaded = sum(counts[1] for counts in by_domain.values())
    lines = [f"{'domain':<22}{'tasks':>6}{'load':>6}", "-" * 34]
    lines += [f"{domain:<22}{total:>6}{ok:>6}" for domain, (total, ok) in sorted(by_domain.items())]
    lines += ["-" * 34, f"{'total':<22}{len(tasks):>6}{loaded:>6}", "",
              f"evaluator loads for {loaded}/{len(tasks)} tasks"]
    lines += [f"missing: {missing[name]} (needed by {', '.join(who)})" for name, who in sorted(needed_by.items())]
    lines += [f"task file error: {e['error']}" for e in tasks.values() if e["error"]]
    modules = answer.get("missing_modules") or []
    lines.append(f"missing modules: {', '.join(modules) if modules else 'none'}")
    if broken:
        lines.append(f"OSWorld's evaluator packages do not import: {broken}")
    lines.append(f"OSWorld code: {answer.get('package')} ({answer.get('python')})")
    return "\n".join(lines), loaded


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m hcu.osworld.evaluator_check", description=__doc__)
    parser.add_argument("--tasks-dir", type=Path, help="V1 tasks folder (examples/<domain>/<id>.json); "
                        "default $HCU_OSWORLD_TASKS_DIR, else the OSWorld checkout's evaluation_examples")
    parser.add_argument("--index", type=Path, help="task index ({domain: [ids]}); default <tasks dir>/test_all.json")
    parser.add_argument("--osworld-python", type=Path, help="the OSWorld interpreter; default the evaluator venv")
    args = parser.parse_args(argv)
    if args.tasks_dir is not None and not args.tasks_dir.is_dir():
        parser.error(f"--tasks-dir: {args.tasks_dir} is not a folder")
    if args.osworld_python is not None and not args.osworld_python.is_file():
        parser.error(f"--osworld-python: {args.osworld_python} does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        tasks_dir = args.tasks_dir or default_v1_tasks_dir(args.osworld_python)
        index = args.index or tasks_dir / "test_all.json"
        tasks = read_index(tasks_dir, index)
    except (TaskError, OSWorldCodeError) as exc:
        print(f"evaluator_check: error: {exc}", file=sys.stderr)
        return 2
    metrics = sorted({name for entry in tasks.values() for name in entry["metrics"]})
    getters = sorted({name for entry in tasks.values() for name in entry["getters"]})
    try:
        answer = check_names(metrics, getters, args.osworld_python)
    except OSWorldCodeError as exc:
        print(f"evaluator_check: error: {exc}", file=sys.stderr)
        return 1
    text, _ = report(tasks, answer)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
