"""Runs the real queue on a config with the stand-in runner (the CLI always uses the real run_task).

Usage: python queue_driver.py CONFIG [--watch]  (exit 0 done or drained, 1 launches stopped, 2 refused, 130 stopped
by SIGTERM/SIGINT; errors as run_queue prints them). --watch: the view run_queue shows (the terminal view on a
terminal, else the plain-line log) on stdout."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from hcu.osworld.live.watch import watcher
from hcu.osworld.queue.panel import QueueDrained, QueueRefused, QueueStopped, run_queue
from hcu.osworld.run_config import load_config

STANDIN = Path(__file__).with_name("standin_runner.py")


def main() -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        runner = [sys.executable, str(STANDIN), "--scenario", os.environ["HCU_STANDIN_SCENARIO"]]
        sinks = [watcher(sys.stdout)] if "--watch" in sys.argv[2:] else []
        run_queue(load_config(sys.argv[1]), runner=runner, poll_interval_sec=0.1, sinks=sinks)
    except QueueRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except QueueStopped as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except QueueDrained as exc:
        print(exc)
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
