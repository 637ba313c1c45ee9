"""python -m hcu.osworld.run_task: one OSWorld task, end to end, in a fresh guest (see attempt/pipeline.py).

Exit status: 0 when the attempt completed (it has a score), 2 for bad flags or a configuration error (the
same input fails the same way again), 1 for any other error or evaluator error (`hcu.osworld.errors`)."""

from __future__ import annotations

import logging
import sys

from hcu.osworld.attempt.options import parse_options
from hcu.osworld.attempt.pipeline import run_task
from hcu.osworld.errors import policy_for
from hcu.osworld.records.interrupts import StopSignals
from hcu.osworld.stand_ins.asset_source import asset_source


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    result = run_task(opts, StopSignals().install(), asset_source=asset_source)
    print(f"result: status={result.status} score={result.score} termination={result.termination_reason} "
          f"failure={result.failure_classification}")
    if result.status == "completed":
        return 0
    return policy_for(result.failure_classification).exit_status or 1


if __name__ == "__main__":
    sys.exit(main())
