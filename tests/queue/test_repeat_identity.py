"""A repeat's identity: its own folder, scope, labels and container name, repeat 1 named as before repeats; the
real run_task records its repeat and prices its own attempt from the token log; cleanup tells repeats apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import orjson
import pytest

from hcu import REPO_ROOT
from hcu.gateway.tokenlog import TokenLogRow, TokenUsage
from hcu.osworld.guest.lifecycle import container_name
from hcu.osworld.queue.containers import cleanup_attempt, run_attempts_with_containers
from hcu.osworld.records.identity import AttemptId, ambiguous_task_id, attempt_of_scope, split_repeat_key
from hcu.osworld.records.result import TaskResult
from hcu.record_io import read_record
from tests.run_task.conftest import TASKS_DIR
from tests.session import unique_run_id


def test_repeat_one_is_named_as_before_and_later_repeats_add_their_number():
    first = AttemptId(run_id="run", task_id="t-1", attempt=2)
    third = AttemptId(run_id="run", task_id="t-1", attempt=2, repeat=3)
    assert (str(first), first.gateway_scope, first.task_key) == ("run/t-1/2", "run.t-1.a2", "t-1")
    assert (str(third), third.gateway_scope, third.task_key) == ("run/t-1.r3/2", "run.t-1.r3.a2", "t-1.r3")
    assert first.labels() == {"hcu.managed": "1", "hcu.run_id": "run", "hcu.task_id": "t-1", "hcu.repeat": "1",
                              "hcu.attempt": "2"}
    assert third.labels()["hcu.repeat"] == "3" and container_name(first) != container_name(third)
    assert split_repeat_key("t-1.r3") == ("t-1", 3) and split_repeat_key("t-1") == ("t-1", 1)


def test_a_scope_is_read_back_only_for_its_own_run_and_tasks():
    tasks = frozenset({"t", "b.c"})
    assert attempt_of_scope("run.t.r2.a3", "run", tasks) == AttemptId(run_id="run", task_id="t", attempt=3, repeat=2)
    assert attempt_of_scope("run.b.c.a1", "run", tasks) == AttemptId(run_id="run", task_id="b.c", attempt=1)
    for other in ("runx.t.a1", "run.t.a0", "run.t", "run.elsewhere.a1", "run.t.r2.ax", "other.t.a1"):
        assert attempt_of_scope(other, "run", tasks) is None, other
    assert ambiguous_task_id("abc.r2") and ambiguous_task_id("abc.r0") and not ambiguous_task_id("abc.rx")


def write_rows(path: Path, scope: str, rows: list[TokenUsage]) -> None:
    with path.open("ab") as log:
        for number, usage in enumerate(rows, start=1):
            record = TokenLogRow(time=1.0, task=scope, provider="openai", model="gpt-5.5", path="/v1/responses",
                                 status=200, outcome="success", counted=True, calls_used=number, usage=usage,
                                 latency_sec=0.1)
            log.write(orjson.dumps(record.model_dump()) + b"\n")


def test_run_task_records_its_repeat_and_prices_its_own_rows(tmp_path: Path):
    """The real runner, on a task file that does not exist: it fails in its load phase, and its collect phase
    still reads the token log, so its result carries its repeat, its usage and its cost, from its scope only."""
    run_id = unique_run_id("repeat-cost")
    token_log = tmp_path / "gateway-tokens.jsonl"
    write_rows(token_log, f"{run_id}.no-such-task.r2.a1", [TokenUsage(input_tokens=400_000, cached_input_tokens=
                                                                       100_000, output_tokens=20_000)] * 2)
    write_rows(token_log, f"{run_id}.no-such-task.a1", [TokenUsage(input_tokens=9_000_000)])  # repeat 1's
    prices = {"gpt-5.5": {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10}}
    result_dir = tmp_path / "result"
    proc = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", "no-such-task", "--task-domain", "os",
         "--tasks-dir", str(TASKS_DIR), "--test-desktop", "--agent", "codex", "--gateway", "http://127.0.0.1:9",
         "--run-id", run_id, "--repeat", "2", "--token-log", str(token_log), "--prices", orjson.dumps(prices).decode(),
         "--result-dir", str(result_dir)], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    result = read_record(result_dir / "result.json", TaskResult)
    assert (result.repeat, result.attempt_id) == (2, f"{run_id}/no-such-task.r2/1")
    assert result.usage is not None and (result.usage.model_calls, result.usage.input_tokens) == (2, 800_000)
    one = 300_000 * 1.25 + 100_000 * 0.125 + 20_000 * 10
    assert result.cost_usd == pytest.approx(2 * one / 1e6)
    lease = orjson.loads((result_dir / "attempt.json").read_bytes())
    assert (lease["repeat"], lease["attempt_id"]) == (2, f"{run_id}/no-such-task.r2/1")


@pytest.mark.parametrize("prices, flag_error", [
    ('{"gpt-5.5": {"input_usd_per_mtok": -1, "cached_input_usd_per_mtok": 0, "output_usd_per_mtok": 1}}',
     "--prices.gpt-5.5.input_usd_per_mtok: Input should be greater than or equal to 0"),
    ("not json", "argument --prices: expected a JSON object"),
    ('{"gpt-9": {"input_usd_per_mtok": 1, "cached_input_usd_per_mtok": 0, "output_usd_per_mtok": 1}}',
     "prices.gpt-9: not a model this run uses (its model is gpt-5.5)"),
])
def test_run_task_refuses_bad_prices_in_one_line(tmp_path: Path, prices: str, flag_error: str):
    proc = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.run_task", "--task-id", "t", "--test-desktop", "--agent", "codex",
         "--prices", prices, "--result-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=60,
        cwd=REPO_ROOT)
    assert proc.returncode == 2 and flag_error in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.docker
def test_cleanup_of_one_repeats_attempt_leaves_another_repeats_alone(sleep_image: str):
    run_id = unique_run_id("repeat-cleanup")
    first, second = (AttemptId(run_id=run_id, task_id="t", attempt=1, repeat=r) for r in (1, 2))
    client = docker.from_env(timeout=60)
    for attempt in (first, second):
        client.containers.run(sleep_image, ["/bin/sleep", "600"], detach=True, labels=attempt.labels(),
                              name=container_name(attempt), network_mode="none")
    try:
        assert run_attempts_with_containers(run_id) == {first, second}
        cleanup_attempt(first)
        assert run_attempts_with_containers(run_id) == {second}
    finally:
        cleanup_attempt(second)
    assert run_attempts_with_containers(run_id) == set()
