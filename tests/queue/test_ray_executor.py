"""The ray executor on a local multi-node cluster, with the stand-in runner: per-node caps held, results and
records brought home in the local layout, a node lost mid-attempt, a killed queue's attempts adopted."""

from __future__ import annotations

import time

import orjson
import pytest
import ray

from hcu.osworld.summary.run_summary import summarize
from tests.queue.ray_checks import manifest, peaks_by_node, results
from tests.queue.ray_cluster import SESSION_NODES

pytestmark = [pytest.mark.docker, pytest.mark.ray]

PHASES = {"boot": (0.3, 0.6), "setup": (0.1, 0.3), "probe": (0.05, 0.1), "agent": (1.5, 2.5),
          "evaluate": (0.2, 0.4)}
GROUP_CAPS = {"boot_setup": "hcu/boot-setup-cap", "agent": "hcu/agent-cap", "evaluate": "hcu/evaluate-cap"}


def run_actors(run_id: str) -> list[str]:
    return [entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)
            if run_id in entry["name"]]


def wait_for(predicate, timeout_sec: float, what: str) -> None:
    deadline = time.time() + timeout_sec
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_caps_held_per_node_and_results_come_home(ray_panel, sleep_image, containers_of):
    tasks = [f"r{i}" for i in range(10)]
    panel = ray_panel(tasks, image=sleep_image, phases=PHASES, max_active_tasks=20)
    assert panel.run() == dict.fromkeys(tasks, "finished")
    run_dir, run_id = panel.run_dir, panel.config.run_id

    recorded = manifest(run_dir)
    assert set(recorded["nodes"]) == set(SESSION_NODES), "attempts ran only on the nodes with guest slots"
    assert sorted(recorded["attempt_nodes"]) == sorted(f"{run_id}/{task}/1" for task in tasks)
    for name, spec in SESSION_NODES.items():
        node = recorded["nodes"][name]
        assert node["slots"] == spec["slots"]
        assert node["caps"] == {group: int(spec["caps"][label]) for group, label in GROUP_CAPS.items()}
    for node, groups in peaks_by_node(run_dir).items():
        for group, peak in groups.items():
            cap = recorded["nodes"][node]["caps"][group]
            assert peak <= cap, f"{node} ran {peak} attempts in {group} at once (cap {cap})"
    logs = [(run_dir / "logs" / f"{task}.log").read_text() for task in tasks]
    assert any("admission: waited" in log for log in logs), "no attempt ever waited: the caps were not tested"

    for task in tasks:  # the local layout: result, lease, progress, placement naming the node, the log
        task_dir = run_dir / "tasks" / task
        assert {"result.json", "attempt.json", "progress.json", "placement.json"} <= {
            p.name for p in task_dir.iterdir()}
        placement = orjson.loads((task_dir / "placement.json").read_bytes())
        assert placement["node"] == recorded["attempt_nodes"][f"{run_id}/{task}/1"]
        assert "=== attempt 1 launched" in (run_dir / "logs" / f"{task}.log").read_text()
    assert all(result["status"] == "completed" for result in results(run_dir))
    assert "All tasks final" in (run_dir / "QUEUE_STATUS.md").read_text()
    summary = summarize(run_dir)
    assert (summary["score"], summary["coverage"], summary["attempts"]) == (1.0, 1.0, len(tasks))
    assert run_actors(run_id) == [], "attempt actors and node agents are gone"
    assert containers_of(run_id) == []
