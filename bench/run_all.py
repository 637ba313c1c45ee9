"""Run every benchmark under bench/ (bench_*.py), each in its own process, print their figures, and write them to
docs/performance.md: per benchmark its docstring (what it measures, against which baseline) and what it printed,
under the machine, load and commit they were measured on. Figures are never asserted.

The long ones (LONG: the canary sweep, about half an hour for the whole index) run only with `--long`; without
it, their last figures in docs/performance.md are kept. `run_all.py bench_x.py ...` runs only those, keeping
the others' last figures."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path

LONG = {"bench_canary_sweep.py"}
HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "docs" / "performance.md"
HEADER = """# Performance

Written by `make bench` (`bench/run_all.py`): each benchmark under `bench/` prints its figures and, where it has
one, a ratio against a baseline measured in the same process; nothing here is asserted by a test. Read a figure
against the baseline printed beside it: on a 2-core machine, anything else running moves both.
"""


def describe(script: Path) -> str:
    return ast.get_docstring(ast.parse(script.read_text())) or ""


def kept_sections(page: Path) -> dict[str, str]:
    """The sections of an earlier page, by benchmark file name (for the long ones not run this time)."""
    if not page.is_file():
        return {}
    parts = re.split(r"^## ", page.read_text(), flags=re.M)[1:]
    return {part.split("\n", 1)[0].strip("` "): "## " + part.rstrip() + "\n" for part in parts}


def section(script: Path, output: str, when: str) -> str:
    return f"## `{script.name}`\n\n{describe(script)}\n\nMeasured {when}:\n\n```\n{output.rstrip()}\n```\n"


def machine() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE.parent).stdout.strip() or "unknown"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores at load {load}, commit {commit}"


def main(argv: list[str]) -> int:
    failed, sections = [], []
    kept = kept_sections(PAGE)
    chosen = {name for name in argv if not name.startswith("--")}
    scripts = sorted(HERE.glob("bench_*.py"))
    if unknown := chosen - {script.name for script in scripts}:
        print(f"run_all.py: no benchmark {', '.join(sorted(unknown))} under {HERE}", file=sys.stderr)
        return 2
    for script in scripts:
        left_out = script.name not in chosen if chosen else script.name in LONG and "--long" not in argv
        if left_out:
            print(f"== {script.name}: left out (its last figures are kept)", flush=True)
            if script.name in kept:
                sections.append(kept[script.name])
            continue
        print(f"== {script.name}", flush=True)
        when = machine()
        done = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr[-4000:] if done.returncode else "")
        if done.returncode != 0:
            failed.append(script.name)
            output = f"(failed to run: exit {done.returncode})\n{done.stderr.strip()[-800:]}"
        else:
            output = done.stdout
        sections.append(section(script, output, when))
    PAGE.write_text(HEADER + "\n" + "\n".join(sections))
    print(f"wrote {PAGE}")
    if failed:
        print(f"benchmarks that failed to run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
