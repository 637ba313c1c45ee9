"""A V2-shaped task class end to end through run_task: the OSWorld process runs the class's setup, the real
Codex CLI (scripted model) writes one of the two lines the task asks for, the class's own evaluate gives
partial credit, and result.json keeps it as the raw score."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.demo.stand_in import scripted_stack
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.session import unique_run_id

pytestmark = [pytest.mark.docker, pytest.mark.artifacts]

V2_TASKS = Path(__file__).resolve().parent / "v2_tasks"
WRITE_ONE_LINE = [
    {"tool": "key", "arguments": {"keys": ["ctrl+alt+t"]}},
    {"tool": "wait", "arguments": {"seconds": 2}},
    {"tool": "type", "arguments": {"text": "echo 'hello v2' > ~/Desktop/notes.txt\n"}},
    {"tool": "wait", "arguments": {"seconds": 1}},
]


def test_a_v2_task_class_runs_end_to_end_with_partial_credit(tmp_path: Path) -> None:
    policies = tmp_path / "policies.json"
    policies.write_bytes(orjson.dumps({"policies": {"half": {
        "match": "whose first line is 'hello v2'", "steps": WRITE_ONE_LINE, "final_message": "Done.\nTASK_COMPLETE",
    }}}))
    token_log, result_dir = tmp_path / "gateway-tokens.jsonl", tmp_path / "result"
    with scripted_stack("codex", policies, token_log=token_log, max_model_calls=20, log_dir=tmp_path / "logs") as stack:
        done = subprocess.run(
            [sys.executable, "-m", "hcu.osworld.run_task", "--benchmark-version", "v2", "--task-id", "901",
             "--tasks-dir", str(V2_TASKS), "--test-desktop", "--agent", "codex", "--max-model-calls", "20",
             "--token-log", str(token_log), "--gateway", stack.gateway_url, "--result-dir", str(result_dir),
             "--run-id", unique_run_id("v2"), "--timeout-seconds", "600", "--no-progress-seconds", "120",
             "--offline-assets"],
            capture_output=True, text=True, timeout=900, cwd=REPO_ROOT,
        )
    log = done.stdout + done.stderr
    result = read_record(result_dir / "result.json", TaskResult)
    assert (result.status, result.score, result.evaluator_score) == ("completed", 0.5, 0.5), log[-3000:]
    assert result.benchmark_version == "v2" and result.task_domain == "tasks"
    assert [p.name for p in result.phases if p.status == "ok"][-3:] == ["evaluate", "collect", "cleanup"]
    meta = read_record(result_dir / "meta.json", AttemptMeta)
    assert [s.type for s in meta.setup_steps] == ["task_class.setup"]
    assert meta.osworld.python.endswith(".venv-osworld/bin/python") and meta.osworld.desktop_env
