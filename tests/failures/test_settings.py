"""The reference's keys and a standalone run's identity: pure logic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu.osworld.attempt.options import parse_options
from hcu.osworld.guest.lifecycle import container_name
from hcu.osworld.queue.launch import runner_args
from hcu.osworld.queue.plan import describe_plan
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import ConfigError, load_config

STANDALONE = ["--task-id", "t1", "--agent", "codex", "--test-desktop"]


def config_at(tmp_path: Path, **body) -> object:
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps({"agent": "codex", "tasks": ["a"], "test_desktop": True,
                                   "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), **body}))
    return load_config(path)


def test_two_standalone_runs_of_one_task_share_nothing() -> None:
    """each standalone run_task gets a run id of its own, hence its own gateway scope (a fresh
    budget), container, volume and port names, and result folder; the queue's runs keep the id it passes."""
    first, second = parse_options(STANDALONE), parse_options(STANDALONE)
    ids = [AttemptId(run_id=o.run_id, task_id=o.task_id, attempt=o.attempt) for o in (first, second)]
    assert first.run_id != second.run_id and all(o.run_id.startswith("single-") for o in (first, second))
    assert ids[0].gateway_scope != ids[1].gateway_scope
    assert container_name(ids[0]) != container_name(ids[1])
    assert first.resolved_result_dir() != second.resolved_result_dir()
    assert parse_options([*STANDALONE, "--run-id", "panel"]).run_id == "panel"


def test_max_model_calls_0_is_no_budget_everywhere(tmp_path: Path) -> None:
    """0 goes through the flag, the config, the runner's command line and the dry run's gateway flags."""
    assert parse_options([*STANDALONE, "--max-model-calls", "0"]).max_model_calls == 0
    config = config_at(tmp_path, max_model_calls=0)
    assert "--max-model-calls 0" in " ".join(runner_args(config, config.tasks[0], 1, tmp_path / "r"))
    assert "--max-requests-per-task 0 --scope-key-file" in describe_plan(config)
    assert "(--max-requests-per-task 0 = no budget)" in describe_plan(config)
    gateway = subprocess.run([sys.executable, "-m", "hcu.gateway.openai_proxy", "--max-requests-per-task", "0",
                              "--host", "127.0.0.1", "--upstreams", "h", "--out", str(tmp_path / "o"), "--ports",
                              "80,x"], capture_output=True, text=True, timeout=60)
    # flags are checked in order: the budget passed, the bad port after it is what the gateway refuses
    assert "--max-requests-per-task" not in gateway.stderr and "--ports" in gateway.stderr, gateway.stderr


def test_the_limits_are_config_keys_and_flags(tmp_path: Path) -> None:
    """Items 11 and 13: the no-progress limit, the settle wait and the gateway's tolerated absence are keys
    and flags; settle_seconds defaults to OSWorld's own 20 s."""
    config = config_at(tmp_path, no_progress_seconds=300, settle_seconds=5, gateway_away_seconds=90)
    options = parse_options(runner_args(config, config.tasks[0], 1, tmp_path / "r"))
    assert (options.no_progress_seconds, options.settle_seconds, options.gateway_away_seconds) == (300, 5, 90)
    assert parse_options(STANDALONE).settle_seconds == 20


@pytest.mark.parametrize("key, value", [("ram_size", "0G"), ("ram_size", "8192"), ("ram_size", 8),
                                        ("volume_size", 0), ("settle_seconds", -1), ("gateway_away_seconds", -1)])
def test_guest_and_limit_fields_are_checked_when_the_config_loads(tmp_path: Path, key: str, value: object) -> None:
    """a value no guest can boot with is refused at load, in one line naming the key."""
    with pytest.raises(ConfigError) as refused:
        config_at(tmp_path, **{key: value})
    assert f"{key}:" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("key, value", [("ram_size", "0G"), ("volume_size", 0)])
def test_a_tasks_own_guest_fields_are_checked_too(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"tasks\[0\]\.{key}:"):
        config_at(tmp_path, tasks=[{"id": "a", key: value}])
