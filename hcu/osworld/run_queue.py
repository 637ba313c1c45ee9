"""`python -m hcu.osworld.run_queue CONFIG [--dry-run [--json]]`: run a panel, resumably (see queue/panel.py), or
print what it would do and the campaign forecast (queue/plan.py). While it runs it shows the live view on a
terminal, else one plain line per event (hcu/osworld/live); `python -m hcu.osworld.ctl` steers it."""

from __future__ import annotations

import argparse
import signal
import sys
from collections import Counter
from pathlib import Path

import orjson

from hcu.osworld.errors import ConfigurationError
from hcu.osworld.live.watch import watcher
from hcu.osworld.queue.forecasting import known_upstreams, quota_mismatch
from hcu.osworld.queue.gate import GatewayMismatch, launch_gate
from hcu.osworld.queue.manifest import ManifestMismatch
from hcu.osworld.queue.panel import (
    DEFAULT_POLL_SEC,
    QueueDrained,
    QueueRefused,
    QueueStopped,
    config_difference,
    run_queue,
)
from hcu.osworld.queue.plan import describe_plan, plan_json
from hcu.osworld.queue.snapshot import read_snapshot
from hcu.osworld.quota.profile import PilotError
from hcu.osworld.run_config import ConfigError, RunConfig, load_config


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def left_running(config: RunConfig | None) -> str:
    """What a stopped queue left running, from the figures it wrote as it stopped."""
    snapshot = read_snapshot(config.run_dir) if config is not None else None
    if snapshot is None:
        return "running attempts continue"
    phases = ", ".join(f"{phase} {count}" for phase, count in sorted(snapshot.phases.items()))
    return f"attempts still running: {snapshot.running}{f' ({phases})' if phases else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hcu.osworld.run_queue",
                                     description="Run a panel of OSWorld tasks from a config, resumably.")
    parser.add_argument("config", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="validate and print the plan; start nothing")
    parser.add_argument("--json", action="store_true", help="with --dry-run: print the plan as one JSON object")
    parser.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SEC)
    args = parser.parse_args(argv)
    if args.json and not args.dry_run:
        parser.error("--json: only with --dry-run")
    config = None
    try:
        config = load_config(args.config)
        upstreams = known_upstreams(config)
        if mismatch := quota_mismatch(config, upstreams):
            raise ConfigError(f"{args.config}: {mismatch}")
        if args.dry_run:
            print(orjson.dumps(plan_json(config, upstreams)).decode() if args.json else
                  describe_plan(config, upstreams))
            if config_difference(config):
                raise QueueRefused(f"{config.run_dir / 'config.json'}: the real run would be refused (see above)")
            return 0
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        states = run_queue(config, poll_interval_sec=args.poll_seconds, gate=launch_gate(config),
                           sinks=[watcher(sys.stdout)])
    except (ConfigError, PilotError, QueueRefused, ManifestMismatch, GatewayMismatch, ConfigurationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except QueueStopped as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except QueueDrained as exc:
        print(f"{exc}: python -m hcu.osworld.run_queue {args.config}")
        return 0
    except KeyboardInterrupt:
        print(f"queue stopped; {left_running(config)}; the next start adopts them: "
              f"python -m hcu.osworld.run_queue {args.config}", file=sys.stderr)
        return 130
    counts = Counter(states.values())
    print(f"{counts['finished']} tasks finished, {counts['exhausted']} out of attempts; "
          f"next: python -m hcu.osworld.summarize {config.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
