"""python -m hcu.osworld.run_task: one OSWorld task, end to end, in a fresh guest (see attempt/pipeline.py)."""

from __future__ import annotations

import logging
import signal
import sys

from hcu.osworld.attempt.options import parse_options
from hcu.osworld.attempt.pipeline import raise_interrupted, run_task


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    signal.signal(signal.SIGTERM, raise_interrupted)
    signal.signal(signal.SIGINT, raise_interrupted)
    result = run_task(opts)
    print(f"result: status={result.status} score={result.score} termination={result.termination_reason} "
          f"failure={result.failure_classification}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
