"""Starting one attempt: the runner's command line from the config, and the detached process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hcu import REPO_ROOT
from hcu.flags import to_flags
from hcu.osworld.run_config import RunConfig, TaskSpec
from hcu.osworld.settings import AttemptSettings

RUN_TASK = (sys.executable, "-m", "hcu.osworld.run_task")
"""The real single-task runner; tests inject a stand-in with the same command-line contract."""


def runner_args(config: RunConfig, task: TaskSpec, attempt: int, result_dir: Path, *, repeat: int = 1) -> list[str]:
    """The run_task command line for one attempt of one repeat of a task: the config's attempt settings (the
    same fields as run_task's flags) with the task's own overrides, then the task, its repeat and attempt, and
    where its results go."""
    return [*to_flags(config.task_settings(task), AttemptSettings), "--task-id", task.id,
            "--run-id", str(config.run_id), "--repeat", str(repeat), "--attempt", str(attempt),
            "--result-dir", str(result_dir)]


def spawn(command: Sequence[str], log_path: Path, attempt: int, *, env: Mapping[str, str] | None = None,
          preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    """Start the runner in its own session, so stopping the queue (even Ctrl-C on its terminal) leaves it
    running. Its output is appended to the task log, one header per attempt, so no earlier output is lost."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"=== attempt {attempt} launched {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
                  .encode())
        log.flush()
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=REPO_ROOT, env=env, preexec_fn=preexec_fn)
