"""Run every benchmark under bench/ (bench_*.py), each in its own process, and print their figures.

The long ones (LONG: the canary sweep, about an hour for the whole index) run only with `--long`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LONG = {"bench_canary_sweep.py"}


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        if script.name in LONG and "--long" not in argv:
            print(f"== {script.name}: long, left out (run it alone, or run_all.py --long)", flush=True)
            continue
        print(f"== {script.name}", flush=True)
        rc = subprocess.call([sys.executable, str(script)], cwd=here.parent)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"benchmarks that failed to run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
