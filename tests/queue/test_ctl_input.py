"""ctl's bad input, and what a restarted queue keeps of what ctl did: without any queue (nothing here needs one
running: ctl refuses before it sends anything)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hcu.osworld import ctl
from hcu.osworld.queue.control import Command, ControlState, QueueControl, parse_setting, settable_keys, with_setting
from hcu.osworld.run_config import RunConfig, parse_config
from tests.quota.pilot import MODEL, PRICES


def run_dir_of(tmp_path: Path, **keys: object) -> tuple[RunConfig, Path]:
    body = {"run_id": "ctl", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "tasks": ["t0", "t1"],
            "max_active_tasks": 2, **keys}
    config = parse_config(body, tmp_path / "ctl.json")
    config.run_dir.mkdir()
    (config.run_dir / "config.json").write_bytes(orjson.dumps(config.model_dump(mode="json")))
    return config, config.run_dir


@pytest.mark.parametrize(("args", "says"), [
    (["set", "max_attempts=3"], "max_attempts: unknown key; expected one of max_active_tasks"),
    (["set", "max_active_tasks=0"], 'max_active_tasks: expected a positive integer or "auto" (got 0)'),
    (["set", "max_active_tasks=two"], 'max_active_tasks: expected a positive integer or "auto" (got "two")'),
    (["set", "auto_max_active_tasks=4"], 'auto_max_active_tasks: only with "max_active_tasks": "auto"'),
    (["set", "launch_stagger_seconds=-1"], "launch_stagger_seconds: Input should be greater than or equal to 0"),
    (["set", "max_cost_usd=5"], "max_cost_usd: needs a price for the run's model"),
    (["set", "max_active_tasks"], "max_active_tasks: expected KEY=VALUE"),
    (["pause"], "no queue is running on this run directory"),
    (["status"], "no queue is running on this run directory"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           args: list[str], says: str) -> None:
    _, run_dir = run_dir_of(tmp_path)
    before = sorted(path.name for path in run_dir.rglob("*"))
    assert ctl.main([str(run_dir), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert sorted(path.name for path in run_dir.rglob("*")) == before, "ctl wrote something"


@pytest.mark.parametrize("args", [["set"], ["pause", "max_active_tasks=3"], ["resume", "--json"], ["halt"]])
def test_malformed_commands_are_refused_by_the_parser(tmp_path: Path, args: list[str]) -> None:
    _, run_dir = run_dir_of(tmp_path)
    with pytest.raises(SystemExit) as ended:
        ctl.main([str(run_dir), *args])
    assert ended.value.code == 2


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl.main([str(tmp_path), "pause"]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: not a run directory (no config.json)\n"


def test_values_are_validated_through_the_run_config(tmp_path: Path) -> None:
    config, _ = run_dir_of(tmp_path, prices=PRICES, model=MODEL)
    assert parse_setting("max_cost_usd=12.5") == ("max_cost_usd", 12.5)
    assert parse_setting("max_cost_usd=null") == ("max_cost_usd", None)
    assert with_setting(config, "max_cost_usd", 12.5).max_cost_usd == 12.5
    assert with_setting(config, "launch_stagger_seconds", 0).launch_stagger_seconds == 0
    assert set(settable_keys()) <= set(RunConfig.model_fields)


def test_a_restarted_queue_keeps_what_set_gave_unless_the_config_changed_that_key(tmp_path: Path) -> None:
    config, run_dir = run_dir_of(tmp_path)
    control = QueueControl(run_dir, config)
    control.apply(Command(id="1-1", verb="set", key="max_active_tasks", value=5, sent_at=0.0))
    control.apply(Command(id="1-2", verb="set", key="launch_stagger_seconds", value=1.5, sent_at=0.0))
    control.apply(Command(id="1-3", verb="pause", sent_at=0.0))
    again = QueueControl(run_dir, config)
    assert (again.paused, again.config.max_active_tasks, again.config.launch_stagger_seconds) == (True, 5, 1.5)
    edited = config.model_copy(update={"max_active_tasks": 3})  # the operator edited the config file since
    third = QueueControl(run_dir, edited)
    assert (third.config.max_active_tasks, third.config.launch_stagger_seconds) == (3, 1.5)
    assert third.kept == {"launch_stagger_seconds": 1.5}
    assert third.dropped == ["max_active_tasks: the config changed it since"]
    state = ControlState.model_validate(orjson.loads((run_dir / "control" / "state.json").read_bytes()))
    assert state.settings == {"launch_stagger_seconds": 1.5} and state.base["max_active_tasks"] == 3
    assert (run_dir / "control").stat().st_mode & 0o777 == 0o700
