"""manifest.json: what it pins, the hash cache, and the refusal when a pinned input changes under a run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from hcu.osworld.queue.manifest import ManifestMismatch, record_start
from hcu.osworld.records.manifest import FileIdentity, IndexedFile, Manifest, TaskIdentity
from hcu.osworld.run_config import load_config
from hcu.record_io import file_sha256

TASK = '{"id": "t1", "instruction": "do it", "config": [], "evaluator": {"func": "exact_match"}}'


@pytest.fixture
def setup(tmp_path: Path):
    task = tmp_path / "tasks" / "examples" / "os" / "t1.json"
    task.parent.mkdir(parents=True)
    task.write_text(TASK)
    image = tmp_path / "guest.qcow2"
    image.write_bytes(b"qcow" * 5000)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "codex").write_bytes(b"cli")
    (artifacts / "agents.json").write_text('{"codex": {"version": "0.99.0"}}')
    body = {"benchmark_version": "v1", "agent": "codex", "tasks": [{"id": "t1", "task_domain": "os"}],
            "guest_image": "guest.qcow2", "tasks_dir": "tasks", "artifact_dir": "artifacts",
            "results_dir": "runs", "gateway": "http://127.0.0.1:9"}
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(body))
    return load_config(path), task, image


def test_manifest_pins_inputs_and_appends_each_start(setup):
    config, task, image = setup
    record_start(config)
    manifest = record_start(config)
    task_sha = hashlib.sha256(task.read_bytes()).hexdigest()
    assert manifest.task_files["t1"] == TaskIdentity(path=str(task), sha256=task_sha)
    assert manifest.osworld_revision.tasks_dir is not None
    assert manifest.osworld_revision.tasks_dir.error == "not a git checkout"
    assert manifest.guest_image == FileIdentity(path=str(image), size=20000,
                                                sha256=hashlib.sha256(image.read_bytes()).hexdigest())
    assert manifest.artifacts.agents_json == {"codex": IndexedFile(version="0.99.0")}
    assert manifest.artifacts.agent["codex"].sha256 == hashlib.sha256(b"cli").hexdigest()
    assert manifest.artifacts.computer_use.error == "not a file"
    assert len(manifest.starts) == 2 and manifest.starts[0].hcu_commit.commit is not None
    assert manifest.starts[0].gateway_health.url == "http://127.0.0.1:9/healthz"
    assert manifest.starts[0].gateway_health.error is not None
    assert "never" in manifest.retry_policy
    stored = orjson.loads((config.run_dir / "manifest.json").read_bytes())
    assert stored["config_sha256"] == manifest.config_sha256
    # a key the manifest could not fill stays out of the file, as it did when these were plain objects
    assert stored["task_files"]["t1"] == {"path": str(task), "sha256": task_sha}
    assert stored["artifacts"]["agents_json"] == {"codex": {"version": "0.99.0"}}
    assert stored["starts"][0]["gateway_health"].keys() == {"url", "error"}
    assert Manifest.model_validate(stored) == manifest


def test_every_artifact_of_the_agent_is_pinned(setup):
    config, _, _ = setup
    (config.artifact_dir / "node").write_bytes(b"node")
    gemini = config.model_copy(update={"agent": "gemini-cli", "agent_binary": config.artifact_dir / "gemini-cli.tgz"})
    manifest = record_start(gemini)
    assert manifest.artifacts.agent["node"].sha256 == hashlib.sha256(b"node").hexdigest()
    assert manifest.artifacts.agent["gemini-cli.tgz"].error == "not a file"


def test_changed_task_file_or_image_is_refused(setup):
    config, task, image = setup
    record_start(config)
    task.write_text(TASK.replace("do it", "do it twice"))
    with pytest.raises(ManifestMismatch, match="task_files changed"):
        record_start(config)
    task.write_text(TASK)
    image.write_bytes(b"other")
    with pytest.raises(ManifestMismatch, match="guest_image changed"):
        record_start(config)


def test_large_file_hash_is_cached_by_path_size_and_mtime(tmp_path: Path):
    big, cache = tmp_path / "big.qcow2", tmp_path / "cache.json"
    big.write_bytes(b"x" * (20 << 20))
    digest = file_sha256(big, cache)
    assert digest == hashlib.sha256(big.read_bytes()).hexdigest()
    key = next(iter(orjson.loads(cache.read_bytes())))
    cache.write_bytes(orjson.dumps({key: "cached"}))
    assert file_sha256(big, cache) == "cached", "an unchanged file must not be hashed again"
