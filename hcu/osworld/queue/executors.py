"""The executor registry: which executor a config names. Only the queue imports it; the executors import the
protocol (executor.py), never this, so nothing imports back.

- `local` (the default, local_executor.py): runner processes on this host's Docker engine.
- `ray` (ray_executor.py): each attempt a guest slot on a Ray node, run by the run's agent there; imported only
  when a config asks for it, so the local path never imports Ray.
"""

from __future__ import annotations

from collections.abc import Sequence

from hcu.osworld.queue.executor import Executor
from hcu.osworld.queue.launch import RUN_TASK
from hcu.osworld.queue.local_executor import LocalExecutor
from hcu.osworld.run_config import RunConfig


def make_executor(config: RunConfig, runner: Sequence[str] | None) -> Executor:
    """The executor a config names; `runner` replaces the real run_task (tests use a stand-in)."""
    if config.executor == "ray":
        from hcu.osworld.queue.ray_executor import RayExecutor  # Ray only when a config asks for it

        return RayExecutor(config, runner)
    return LocalExecutor(config, runner or RUN_TASK)
