"""Starting one attempt: the runner's command line from the config, and the detached process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hcu import REPO_ROOT
from hcu.osworld.queue.config import RunConfig, TaskSpec

RUN_TASK = (sys.executable, "-m", "hcu.osworld.run_task")
"""The real single-task runner; tests inject a stand-in with the same command-line contract."""


def _optional(flag: str, value: object) -> list[str]:
    return [] if value is None else [flag, str(value)]


def _guest_args(config: RunConfig, task: TaskSpec) -> list[str]:
    if config.guest_image is not None:
        guest = ["--guest-image", str(config.guest_image)]
    else:
        guest = ["--test-desktop"] + ([] if config.test_desktop is True else [str(config.test_desktop)])
    return guest + [
        "--volume-size", str(task.volume_size or config.volume_size),
        "--ram-size", task.ram_size or config.ram_size,
        "--client-password", str(config.client_password),
    ]


def _agent_args(config: RunConfig) -> list[str]:
    args = ["--agent", config.agent, "--model", str(config.model), "--effort", str(config.effort),
            "--max-model-calls", str(config.max_model_calls), "--token-log", str(config.token_log),
            "--gateway", str(config.gateway), "--timeout-seconds", f"{config.timeout_seconds:g}",
            "--instructions-file", str(config.instructions_file),
            *_optional("--base-instructions-file", config.base_instructions_file),
            *_optional("--agent-binary", config.agent_binary), *_optional("--mcp-binary", config.mcp_binary)]
    if config.channels:
        args += ["--channels", ",".join(config.channels)]
    if config.code_mode:
        args.append("--code-mode")
    return args


def runner_args(config: RunConfig, task: TaskSpec, attempt: int, result_dir: Path) -> list[str]:
    """The agreed run_task arguments for one attempt of one task."""
    args = ["--benchmark-version", config.benchmark_version, "--task-id", task.id,
            *_optional("--task-domain", config.domain_of(task)), *_optional("--tasks-dir", config.tasks_dir),
            *_guest_args(config, task), *_agent_args(config),
            "--result-dir", str(result_dir), "--run-id", str(config.run_id), "--attempt", str(attempt),
            "--artifact-dir", str(config.artifact_dir), "--asset-cache", str(config.asset_cache)]
    if config.offline_assets:
        args.append("--offline-assets")
    return args


def spawn(command: Sequence[str], log_path: Path, attempt: int) -> subprocess.Popen[bytes]:
    """Start the runner in its own session, so stopping the queue (even Ctrl-C on its terminal) leaves it
    running. Its output is appended to the task log, one header per attempt, so no earlier output is lost."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"=== attempt {attempt} launched {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
                  .encode())
        log.flush()
        return subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=REPO_ROOT)
