"""The run config: defaults, path resolution, the runner command it implies, refusals, the shipped files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.queue.launch import runner_args
from hcu.osworld.queue.panel import config_difference
from hcu.osworld.run_config import ConfigError, load_config, parse_config, schema_text
from hcu.record_io import write_json
from tests.official_tasks import OFFICIAL_TASKS

EXAMPLE = REPO_ROOT / "configs" / "osworld-v1-codex-queue.example.json"
SCHEMA = REPO_ROOT / "configs" / "schema" / "run-config.schema.json"


def config_at(tmp_path: Path, name: str = "my-run.json", **body):
    base = {"benchmark_version": "v1", "agent": "codex", "tasks": ["a"], "guest_image": "img/v1.qcow2"}
    path = tmp_path / "cfgs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({**base, **body}))
    return load_config(path)


@pytest.mark.parametrize("agent, model, effort, port", [
    ("codex", "gpt-5.5", "xhigh", 8611), ("claude-code", "claude-opus-5", "xhigh", 8537),
    ("gemini-cli", "gemini-3.8-flash", "high", 8571), ("grok-build", "grok-4.7", "xhigh", 8611)])
def test_agent_defaults(tmp_path: Path, agent: str, model: str, effort: str, port: int):
    config = config_at(tmp_path, agent=agent)
    assert (config.model, config.effort) == (model, effort)
    assert config.gateway is not None and config.gateway.startswith("http://")
    assert config.gateway.endswith(f":{port}")


def test_version_defaults_and_overrides(tmp_path: Path):
    v1, v2 = config_at(tmp_path), config_at(tmp_path, benchmark_version="v2")
    assert (v1.client_password, v1.volume_size) == ("password", 64)
    assert (v2.client_password, v2.volume_size) == ("osworld-public-evaluation", 100)
    assert config_at(tmp_path, volume_size=80, model="m").volume_size == 80


def test_paths_resolve_against_the_config_file_and_default_to_the_repo(tmp_path: Path):
    config = config_at(tmp_path, results_dir="../out", agent_binary="bin/codex", instructions_file="guide.md")
    here = (tmp_path / "cfgs").resolve()
    assert config.run_id == "my-run" and config.run_dir == (tmp_path / "out" / "my-run").resolve()
    assert config.guest_image == here / "img" / "v1.qcow2" and config.agent_binary == here / "bin" / "codex"
    assert config.instructions_file == str(here / "guide.md")
    assert config.token_log == config.run_dir / "gateway-tokens.jsonl"
    assert config.artifact_dir == REPO_ROOT / "artifacts" and config.asset_cache == REPO_ROOT / "assets"
    assert config.base_instructions_file == REPO_ROOT / "instructions" / "base.md"
    assert config_at(tmp_path).results_dir == REPO_ROOT / "runs"


def test_runner_args_carry_the_config_and_task_overrides(tmp_path: Path):
    config = config_at(tmp_path, tasks=["a", {"id": "b", "task_domain": "os", "volume_size": 80}],
                       guest_image=None, test_desktop=True, instructions_file="",
                       channels=["gui", "keyboard"], code_mode=True, offline_assets=True,
                       task_domain="chrome", max_model_calls=7)
    args = runner_args(config, config.tasks[1], 3, tmp_path / "r")
    joined = " ".join(args)
    guest = "--task-domain os --test-desktop hcu-test-desktop:latest --volume-size 80 --ram-size 4G"
    assert guest in joined
    assert args[args.index("--instructions-file") + 1] == ""
    for expected in ("--channels gui,keyboard", "--code-mode", "--offline-assets", "--attempt 3",
                     "--max-model-calls 7", f"--result-dir {tmp_path / 'r'}", "--run-id my-run"):
        assert expected in joined
    assert "--task-domain chrome" in " ".join(runner_args(config, config.tasks[0], 1, tmp_path))


@pytest.mark.parametrize("change, message", [
    ({"tasks": [{"id": "a", "ram_size": 4}]}, "tasks[0].ram_size: Input should be a valid string"),
    ({"tasks": ["../escape"]}, "tasks[0].id: String should match pattern"),
    ({"tasks": []}, "tasks: List should have at least 1 item"),
    ({"test_desktop": True}, "guest_image: expected a qcow2 path, or the test desktop instead"),
    ({"ram_size": "8192"}, "ram_size: String should match pattern"),
    ({"channels": ["gui", "gui"]}, "channels: a channel is listed twice"),
    ({"agent": "cursor"}, "agent: Input should be 'codex', 'claude-code', 'gemini-cli' or 'grok-build'"),
    ({"tasks": [{"id": "a", "sratum": "x"}]}, "tasks[0].sratum: unknown key"),
    ({"max_active_tasks": 0}, 'max_active_tasks: expected a positive integer or "auto" (got 0)'),
    ({"max_active_tasks": "auto"}, 'max_active_tasks: "auto" needs auto_max_active_tasks, the most attempts'),
    ({"max_active_tasks": "auto", "auto_max_active_tasks": -2},
     "auto_max_active_tasks: Input should be greater than 0"),
    ({"max_active_tasks": "auto", "auto_max_active_tasks": "9"},
     "auto_max_active_tasks: Input should be a valid integer"),
    ({"auto_max_active_tasks": 9},
     'auto_max_active_tasks: only with "max_active_tasks": "auto" (got max_active_tasks 1)'),
])
def test_bad_configs_name_the_key(tmp_path: Path, change: dict, message: str):
    with pytest.raises(ConfigError) as error:
        config_at(tmp_path, **change)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_resumed_run_may_switch_to_auto_and_change_its_ceiling(tmp_path: Path):
    fixed = config_at(tmp_path, max_active_tasks=2)
    write_json(fixed.run_dir / "config.json", fixed.model_dump(mode="json"))
    for keys in ({"max_active_tasks": "auto", "auto_max_active_tasks": 8},
                 {"max_active_tasks": "auto", "auto_max_active_tasks": 3}, {"max_active_tasks": 5}):
        assert config_difference(config_at(tmp_path, **keys)) == [], keys
    assert config_at(tmp_path, max_active_tasks="auto", auto_max_active_tasks=3).active_ceiling == 3


def test_run_id_from_an_unusable_file_name_is_refused(tmp_path: Path):
    with pytest.raises(ConfigError, match="run_id: expected letters"):
        config_at(tmp_path, name="my run.json")


def test_shipped_schema_is_the_generated_one():
    assert SCHEMA.read_text() == schema_text()
    out = subprocess.run([sys.executable, "-m", "hcu.osworld.run_config", "--schema"], capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout == SCHEMA.read_text()


def test_example_is_a_twenty_task_v1_panel_over_every_domain():
    config = load_config(EXAMPLE)
    assert (config.benchmark_version, config.agent, len(config.tasks)) == ("v1", "codex", 20)
    index = orjson.loads((OFFICIAL_TASKS / "test_all.json").read_bytes())
    assert {task.task_domain for task in config.tasks} == set(index)
    for task in config.tasks:
        assert task.id in index[task.task_domain], task.id
    assert parse_config(orjson.loads(EXAMPLE.read_bytes()), EXAMPLE) == config


@pytest.mark.parametrize("channels, guide", [(None, "hybrid.md"), (["a11y", "keyboard"], "ax-only.md"),
                                             (["gui", "keyboard"], "gui-only.md")])
def test_default_guide_follows_the_channels(tmp_path: Path, channels, guide: str):
    chosen = {"channels": channels} if channels else {}
    assert config_at(tmp_path, **chosen).instructions_file == str(REPO_ROOT / "instructions" / guide)


@pytest.mark.parametrize("change", [{}, {"guest_image": None, "test_desktop": True, "instructions_file": ""},
                                    {"guest_image": None, "test_desktop": "img:tag", "channels": ["gui"]}])
def test_runner_command_parses_under_run_task(tmp_path: Path, change: dict):
    """The contract with the single-task runner: every argument the queue passes is one run_task accepts."""
    from hcu.osworld.attempt.options import parse_options

    config = config_at(tmp_path, tasks=[{"id": "t", "task_domain": "os", "ram_size": "8G"}], code_mode=True,
                       offline_assets=True, agent_binary="bin/codex", **change)
    options = parse_options(runner_args(config, config.tasks[0], 2, tmp_path / "r"))
    assert (options.task_id, options.attempt, options.run_id, options.ram_size) == ("t", 2, "my-run", "8G")
    assert options.max_model_calls == config.max_model_calls and options.offline_assets and options.code_mode


PRICE = {"input_usd_per_mtok": 1.25, "cached_input_usd_per_mtok": 0.125, "output_usd_per_mtok": 10.0}


@pytest.mark.parametrize("change, message", [
    ({"repeats": 0}, "repeats: Input should be greater than or equal to 1 (got 0)"),
    ({"tasks": [{"id": "a", "repeats": 0}]}, "tasks[0].repeats: Input should be greater than or equal to 1"),
    ({"tasks": ["a.r2"]}, "tasks[0].id: 'a.r2' ends like a repeat's folder (<task>.r<n>)"),
    ({"prices": {"gpt-5.5": {**PRICE, "input_per_mtok": 1}}}, "prices.gpt-5.5.input_per_mtok: unknown key"),
    ({"prices": {"gpt-5.5": {**PRICE, "output_usd_per_mtok": -2}}},
     "prices.gpt-5.5.output_usd_per_mtok: Input should be greater than or equal to 0 (got -2)"),
    ({"prices": {"gpt-4o": PRICE}}, "prices.gpt-4o: not a model this run uses (its model is gpt-5.5)"),
    ({"prices": {"gpt-5.5": {**PRICE, "cache_write_usd_per_mtok": 1}}},
     "prices.gpt-5.5.cache_write_usd_per_mtok: only Anthropic bills cache writes apart (agent codex talks to "
     "openai)"),
    ({"agent": "claude-code", "prices": {"claude-opus-5": PRICE}},
     "prices.claude-opus-5.cache_write_usd_per_mtok: required for an Anthropic model"),
    ({"max_cost_usd": 100}, "max_cost_usd: needs a price for the run's model (prices.gpt-5.5)"),
    ({"max_cost_usd": 0, "prices": {"gpt-5.5": PRICE}}, "max_cost_usd: Input should be greater than 0"),
    ({"prices": {"gpt-5.5": {"input_usd_per_mtok": 1}}}, "prices.gpt-5.5.cached_input_usd_per_mtok: missing"),
])
def test_bad_repeats_and_prices_name_the_key(tmp_path: Path, change: dict, message: str):
    with pytest.raises(ConfigError) as error:
        config_at(tmp_path, **change)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_prices_and_repeats_reach_the_runner_and_parse_under_run_task(tmp_path: Path):
    from hcu.osworld.attempt.options import parse_options

    anthropic = {**PRICE, "cache_write_usd_per_mtok": 15.0}
    config = config_at(tmp_path, agent="claude-code", prices={"claude-opus-5": anthropic}, max_cost_usd=50,
                       repeats=3, tasks=["a", {"id": "b", "repeats": 5}])
    assert [config.repeats_of(task) for task in config.tasks] == [3, 5]
    options = parse_options(runner_args(config, config.tasks[1], 2, tmp_path / "r", repeat=4))
    assert (options.repeat, options.attempt) == (4, 2)
    assert options.prices == config.prices and options.prices["claude-opus-5"].cache_write_usd_per_mtok == 15.0
    assert "--max-cost-usd" not in runner_args(config, config.tasks[0], 1, tmp_path), "a panel key, not the runner's"


def test_a_stored_config_resolves_to_itself_with_symlinked_artifacts(tmp_path: Path):
    """A rerun config is the stored config.json written back as a config file: loading it must give the same
    run (a symlinked agent CLI, as in a checkout sharing another's artifacts, included)."""
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "codex").write_bytes(b"cli")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "codex").symlink_to(real / "codex")
    first = config_at(tmp_path, artifact_dir=str(artifacts), repeats=2)
    again = tmp_path / "again.json"
    again.write_bytes(orjson.dumps(first.model_dump(mode="json")))
    assert load_config(again).comparable() == first.comparable()
    assert first.agent_binary == artifacts / "codex"
