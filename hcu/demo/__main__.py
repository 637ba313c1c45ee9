"""python -m hcu.demo: the built-in default job.

Runs configs/demo.json — a small panel of real OSWorld `os` tasks on the local test desktop — through the real
queue, runner, agent CLI, gateway and official evaluator, with the scripted policy upstream standing in for the
model, then writes and prints summary.md. Each demo run starts from an empty run directory (a fresh token log).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.live.watch import watcher
from hcu.osworld.queue.gate import launch_gate
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.run_config import ConfigError, load_config
from hcu.osworld.summary.run_summary import summarize

DEFAULT_CONFIG = REPO_ROOT / "configs" / "demo.json"
DEFAULT_POLICIES = REPO_ROOT / "configs" / "demo-policies.json"


def run_demo(config_path: Path, policies: Path) -> Path:
    """Run the panel and summarize it; returns the path of summary.md."""
    config = load_config(config_path)
    shutil.rmtree(config.run_dir, ignore_errors=True)
    port = urlsplit(config.gateway).port
    with scripted_stack(config.agent, policies, token_log=config.token_log, max_model_calls=config.max_model_calls,
                        log_dir=config.run_dir / "stand-in", gateway_port=port, scope_key_file=config.scope_key_file):
        run_queue(config, gate=launch_gate(config), sinks=[watcher(sys.stdout)])
    summarize(config.run_dir)
    return config.run_dir / "summary" / "summary.md"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hcu.demo", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--policies", type=Path, default=DEFAULT_POLICIES)
    args = p.parse_args(argv)
    try:
        summary = run_demo(args.config, args.policies)
    except ConfigError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    print(summary.read_text())
    print(f"(written to {summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
