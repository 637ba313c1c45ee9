"""Fixtures for queue tests: a panel config in tmp_path, a scenario for the stand-in runner, a tiny image."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import orjson
import pytest

from hcu.osworld.queue.panel import run_queue
from hcu.osworld.run_config import load_config
from tests.queue.ray_cluster import TestCluster, ray_environment, start_cluster

ray_environment()  # before anything imports Ray: it reads these once, at import

HERE = Path(__file__).parent
STANDIN = HERE / "standin_runner.py"
DRIVER = HERE / "queue_driver.py"
SLEEP_IMAGE = "hcu-queue-test-sleep:latest"


def wait_for(predicate, timeout_sec: float, what: str) -> None:
    """Poll `predicate` until it holds; fail naming `what` after `timeout_sec`."""
    deadline = time.time() + timeout_sec
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _sleep_rootfs() -> bytes:
    """/bin/sleep and the libraries it links, as an image rootfs tar (no registry needed)."""
    ldd = subprocess.run(["ldd", "/bin/sleep"], capture_output=True, text=True, check=True).stdout
    paths = ["/bin/sleep"] + [part for part in ldd.split() if part.startswith("/")]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in paths:
            tar.add(os.path.realpath(path), arcname=path.lstrip("/"))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def sleep_image() -> str:
    client = docker.from_env(timeout=60)
    try:
        client.images.get(SLEEP_IMAGE)
    except docker.errors.ImageNotFound:
        repository, tag = SLEEP_IMAGE.split(":")
        client.api.import_image_from_data(_sleep_rootfs(), repository=repository, tag=tag)
    return SLEEP_IMAGE


@dataclass
class Panel:
    config_path: Path
    scenario_path: Path
    events_path: Path

    @property
    def config(self):
        return load_config(self.config_path)

    @property
    def run_dir(self) -> Path:
        return self.config.run_dir

    def edit(self, **changes: Any) -> None:
        data = orjson.loads(self.config_path.read_bytes())
        data.update(changes)
        self.config_path.write_bytes(orjson.dumps(data))

    def run(self) -> dict[str, str]:
        runner = [sys.executable, str(STANDIN), "--scenario", str(self.scenario_path)]
        return run_queue(self.config, runner=runner, poll_interval_sec=0.05)

    def start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, str(DRIVER), str(self.config_path)], stderr=subprocess.PIPE)

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        return [orjson.loads(line) for line in self.events_path.read_bytes().splitlines()]

    def queue_events(self) -> list[dict[str, Any]]:
        path = self.run_dir / "logs" / "queue.jsonl"
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def make_panel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A panel config and scenario in tmp_path; the gateway points at a closed loopback port."""

    def make(task_ids: list[str], *, outcomes: dict[str, list[dict]] | None = None, image: str | None = None,
             sleep_sec: tuple[float, float] = (0.2, 0.6), phases: dict[str, tuple[float, float]] | None = None,
             ask_gateway: bool = False, scenario: dict[str, Any] | None = None, **config: Any) -> Panel:
        """`scenario`: the stand-in's other entries (token_rows, start_after, signal_file, wait_file)."""
        events = tmp_path / "standin-events.jsonl"
        scenario_path = tmp_path / "scenario.json"
        scenario_path.write_bytes(orjson.dumps({"sleep_sec": sleep_sec, "image": image, "events": str(events),
                                                "outcomes": outcomes or {}, "phases": phases,
                                                "ask_gateway": ask_gateway, **(scenario or {})}))
        monkeypatch.setenv("HCU_STANDIN_SCENARIO", str(scenario_path))
        body = {"run_id": f"qtest-{uuid.uuid4().hex[:8]}", "benchmark_version": "v1", "agent": "codex",
                "tasks": task_ids, "test_desktop": "none:latest",
                "gateway": "http://127.0.0.1:9", "results_dir": "runs", "max_active_tasks": 2,
                "launch_stagger_seconds": 0, **config}
        path = tmp_path / "panel.json"
        path.write_bytes(orjson.dumps(body))
        return Panel(path, scenario_path, events)

    return make


@pytest.fixture
def containers_of():
    """Every container, running or not, labelled with a run id."""
    client = docker.from_env(timeout=60)
    return lambda run_id: client.containers.list(all=True, filters={"label": f"hcu.run_id={run_id}"})


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the session (head + node-a + node-b), shut down at its end; the test
    process joins it as a driver too, so the tests can look at the cluster's actors."""
    cluster = start_cluster()
    import ray

    ray.init(address=cluster.address, namespace="hcu", log_to_driver=False, logging_level="WARNING")
    yield cluster
    ray.shutdown()
    cluster.cluster.shutdown()


@pytest.fixture
def ray_panel(make_panel, ray_cluster: TestCluster):
    """A panel on the session's Ray cluster (executor ray), with the stand-in runner."""

    def make(task_ids: list[str], *, ray: dict[str, Any] | None = None, **kwargs: Any) -> Panel:
        settings = {"address": ray_cluster.address, **(ray or {})}
        return make_panel(task_ids, executor="ray", ray=settings, **kwargs)

    return make
