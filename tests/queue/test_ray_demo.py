"""The demo's panel (real OSWorld tasks on the test desktop, the real Codex CLI, real gateways, OSWorld's
evaluator in its own process, the scripted model) through the ray executor gives the scores, summary and counted
model calls the local executor gives; each node's own gateway serves its attempts with the run's scope key
(per-task secrets) and the head's token log holds every row once."""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from hcu.demo.__main__ import DEFAULT_POLICIES
from hcu.demo.stand_in import STAND_IN_TOKEN, free_port
from hcu.gateway.scope_secret import key_id, load_or_create_key
from hcu.osworld.attempt.meta import AttemptMeta
from hcu.osworld.queue.panel import run_queue
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.run_config import load_config
from hcu.osworld.summary.run_summary import summarize
from hcu.record_io import read_record
from tests.demo_panel import EXPECTED_SCORE, DemoRun, demo_config
from tests.queue.ray_checks import manifest, peaks_by_node, results
from tests.queue.ray_cluster import UPSTREAM_TOKEN_ENV

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.ray]

SAME_PER_TASK = ("task_id", "status", "score", "evaluator_score", "withheld_reason", "termination",
                 "failure_class", "attempts")
SAME_SUMMARY = ("tasks", "valid", "withheld", "coverage", "score", "lower_bound", "upper_bound", "binary_rate",
                "ci95", "binary_ci95", "statuses", "terminations", "failure_classes", "withheld_tasks",
                "attempts", "retried_tasks", "by_domain", "by_stratum", "scripted_model")


def scripted_upstream(log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The scripted model on loopback, which every node's gateway forwards to."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hcu.scripted.policy", "--policies", str(DEFAULT_POLICIES),
                                 "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            assert proc.poll() is None and time.time() < deadline, "the scripted upstream did not start"
            time.sleep(0.1)


def task_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "summary" / "tasks.csv").open() as f:
        return sorted(({key: row[key] for key in SAME_PER_TASK} for row in csv.DictReader(f)),
                      key=lambda row: row["task_id"])


@pytest.mark.timeout(1800)
def test_demo_through_ray_matches_local(tmp_path: Path, demo_run: DemoRun, ray_cluster) -> None:
    local_dir = demo_run.run_dir  # the README's demo command, run once per session
    upstream, port = scripted_upstream(tmp_path / "scripted-upstream.log")
    try:
        gateway = {"upstream_args": ["--upstreams", f"127.0.0.1:{port}", "--upstream-kind", "openai",
                                     "--upstream-scheme", "http"], "upstream_token_env": UPSTREAM_TOKEN_ENV}
        # the demo's own concurrency (2), as in the local run: its scripted policy waits fixed times for
        # windows to open, so a busier machine could change a score on either executor
        config = load_config(demo_config(tmp_path, "demo-ray", executor="ray",
                                         ray={"address": ray_cluster.address, "node_gateway": gateway}))
        assert config.gateway is None
        run_queue(config)
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    ray_dir = config.run_dir
    summary, local = summarize(ray_dir), orjson.loads((local_dir / "summary" / "summary.json").read_bytes())

    assert {key: summary[key] for key in SAME_SUMMARY} == {key: local[key] for key in SAME_SUMMARY}
    assert task_rows(ray_dir) == task_rows(local_dir)
    for field in ("requests", "model_calls"):  # a generation delivered before the CLI hung up counts either way
        used = [{r["task_id"]: r["usage"][field] for r in results(run_dir)} for run_dir in (ray_dir, local_dir)]
        assert used[0] == used[1], f"the scripted model served other {field} on ray"
    for run_dir in (ray_dir, local_dir):
        outcomes = [orjson.loads(line)["outcome"] for line in (run_dir / "gateway-tokens.jsonl").read_bytes().split()]
        assert "disconnected" not in outcomes, f"{run_dir.name}: a delivered generation logged as disconnected"
    assert (summary["score"], summary["coverage"]) == (EXPECTED_SCORE, 1.0)  # README's stated demo score, both ways

    recorded = manifest(ray_dir)
    assert set(recorded["attempt_nodes"].values()) <= {"node-a", "node-b"}
    assert recorded["starts"][0]["gateway_health"] == {"per_node": "each Ray node starts the run's gateway on "
                                                                    "its own bridge"}
    for node, groups in peaks_by_node(ray_dir).items():
        for group, peak in groups.items():
            assert peak <= recorded["nodes"][node]["caps"][group], (node, group, peak)

    run_key = key_id(load_or_create_key(config.scope_key_file))
    rows = [orjson.loads(line) for line in (ray_dir / "gateway-tokens.jsonl").read_bytes().splitlines()]
    gateways: dict[str, set[str]] = {}
    for result in results(ray_dir):  # each attempt's rows came home once, from the gateway of its node
        scope = AttemptId(run_id=result["run_id"], task_id=result["task_id"], attempt=result["attempt"]).gateway_scope
        mine = [row for row in rows if row["task"] == scope]
        assert len(mine) == result["usage"]["requests"] and result["usage"]["requests"] > 0, scope
        meta = read_record(ray_dir / "tasks" / result["task_id"] / "meta.json", AttemptMeta)
        gateways.setdefault(recorded["attempt_nodes"][result["attempt_id"]], set()).add(meta.gateway)
        health = meta.gateway_health  # the node's gateway serves each scope only to its secret, the run's key
        assert health is not None, scope
        assert (health.scope_secrets, health.scope_key_id) == (True, run_key), scope
    assert all(len(urls) == 1 for urls in gateways.values()), f"one gateway per node: {gateways}"
    assert len(set.union(*gateways.values())) == len(gateways), f"each node its own gateway: {gateways}"
    key = config.scope_key_file.read_text().strip().encode()
    for path in ray_dir.rglob("*"):
        if path.is_file():
            assert STAND_IN_TOKEN.encode() not in path.read_bytes(), f"the upstream credential leaked into {path}"
            assert path == config.scope_key_file or key not in path.read_bytes(), f"the scope key leaked into {path}"
