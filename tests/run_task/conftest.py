"""End-to-end fixtures: real run_task subprocesses on the test desktop, real agent CLIs, real gateways, and
the scripted policy upstream as the only stand-in (for the model)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.gateway.scope_secret import load_or_create_key, scope_secret
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.errors import policy_for
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.session import TEST_DESKTOP_IMAGE, unique_run_id

TASKS_DIR = REPO_ROOT / "configs" / "demo-tasks"
RENAME_TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"
INFEASIBLE_TASK = "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa"
RENAME_MATCH = 'change its name into "todo_list_Jan_2"'
INFEASIBLE_MATCH = "switch on the Bluetooth"
RENAME_STEPS = [
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}},
    {"tool": "wait", "arguments": {"seconds": 2}},
    {"tool": "type", "arguments": {"text": "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2\n"}},
    {"tool": "wait", "arguments": {"seconds": 1}},
]
LOOK_STEPS = [{"tool": "screenshot", "arguments": {"max_width": 640}}]


def policy(match: str, steps: list[dict], final: str = "Done.\nTASK_COMPLETE", **extra: object) -> dict:
    return {"match": match, "steps": steps, "final_message": final, **extra}


class TaskRun:
    def __init__(self, result: TaskResult, result_dir: Path, token_log: Path, log: str, scope_key_file: Path) -> None:
        self.result, self.result_dir, self.token_log, self.log = result, result_dir, token_log, log
        self.scope_key_file = scope_key_file
        """Per-task secrets are on in every end-to-end run, as in a panel."""

    def scope_secret(self) -> str:
        return scope_secret(load_or_create_key(self.scope_key_file), self.scope)

    @property
    def scope(self) -> str:
        """The attempt's gateway scope, as the runner recorded it."""
        return read_record(self.result_dir / "meta.json", AttemptMeta).scope

    def token_rows(self) -> list[dict]:
        if not self.token_log.exists():
            return []
        return [orjson.loads(line) for line in self.token_log.read_bytes().splitlines() if line.strip()]

    def trace_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.result_dir.glob("phase-agent-turn-*")))


RunFn = Callable[..., TaskRun]


def expected_exit_status(result: TaskResult) -> int:
    """run_task's exit status for a result 0 only for a completed attempt."""
    return 0 if result.status == "completed" else policy_for(result.failure_classification).exit_status


@pytest.fixture
def run_task(tmp_path: Path) -> RunFn:
    """Run one task end to end with a scripted policy; returns the result and the evidence."""

    def run(agent: str, task_id: str, policies: dict[str, dict], *, max_model_calls: int = 20,
            extra_args: list[str] = (), rate_limit_max_wait: float = 300.0, image: str | None = None,
            gateway_budget: int | None = None, timeout: float = 900) -> TaskRun:
        out = tmp_path / f"{agent}-{task_id[:8]}-{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        policy_file = out / "policies.json"
        policy_file.write_bytes(orjson.dumps({"policies": policies}))
        token_log, result_dir, key_file = out / "gateway-tokens.jsonl", out / "result", out / "gateway-scope.key"
        with scripted_stack(agent, policy_file, token_log=token_log, max_model_calls=gateway_budget or max_model_calls,
                            log_dir=out / "logs", rate_limit_max_wait=rate_limit_max_wait,
                            scope_key_file=key_file) as stack:
            proc = subprocess.run(
                [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", task_id, "--task-domain", "os",
                 "--tasks-dir", str(TASKS_DIR), "--test-desktop", image or TEST_DESKTOP_IMAGE,
                 "--agent", agent, "--max-model-calls", str(max_model_calls), "--token-log", str(token_log),
                 "--gateway", stack.gateway_url, "--result-dir", str(result_dir), "--run-id", unique_run_id("e2e"),
                 "--timeout-seconds", "600", "--no-progress-seconds", "120", "--offline-assets",
                 "--scope-key-file", str(key_file), "--settle-seconds", "1",
                 "--keep-final-desktop", "none", *extra_args],  # keeping is tested where it is the point
                capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
        log = proc.stdout + proc.stderr
        assert (result_dir / "result.json").is_file(), log[-3000:]
        result = read_record(result_dir / "result.json", TaskResult)
        assert proc.returncode == expected_exit_status(result), log[-3000:]
        return TaskRun(result, result_dir, token_log, log, key_file)

    return run
