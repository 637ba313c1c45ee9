"""The ray executor on a local multi-node cluster, with the stand-in runner: per-node caps held, results and
records brought home in the local layout, the run's scope key on every node (runners and node gateways), a
node lost mid-attempt, a killed queue's attempts adopted."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import ray

from hcu.gateway.scope_secret import key_id, load_or_create_key
from hcu.osworld.queue.panel import QueueStopped
from hcu.osworld.summary.run_summary import summarize
from tests.queue.conftest import wait_for
from tests.queue.ray_checks import manifest, peaks_by_node, results
from tests.queue.ray_cluster import SESSION_NODES, UPSTREAM_TOKEN_ENV

pytestmark = [pytest.mark.docker, pytest.mark.ray]

PHASES = {"boot": (0.3, 0.6), "setup": (0.1, 0.3), "probe": (0.05, 0.1), "agent": (1.5, 2.5),
          "evaluate": (0.2, 0.4)}
GROUP_CAPS = {"boot_setup": "hcu/boot-setup-cap", "agent": "hcu/agent-cap", "evaluate": "hcu/evaluate-cap"}


def run_handles(run_id: str) -> list[str]:
    """The names of the run's node agents and of its slot reservations that Ray still holds."""
    agents = [entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True) if run_id in entry["name"]]
    groups = [entry["name"] for entry in ray.util.placement_group_table().values()
              if run_id in entry["name"] and entry["state"] != "REMOVED"]
    return agents + groups


def secret_checks(panel, within: Path | None = None) -> list[dict]:
    """Every runner issued secrets with the run's key, from a 0600 copy on its node (in `within`, when given)
    that is gone with the run; the key is nowhere in the run directory but its own file. Returns the starts."""
    key_file = panel.config.scope_key_file
    starts = [event for event in panel.events() if event["event"] == "start"]
    assert starts and {event["key_id"] for event in starts} == {key_id(load_or_create_key(key_file))}
    for event in starts:
        copy = Path(event["key_file"])
        assert copy != key_file and event["key_mode"] == 0o600 and not event["key_in_argv"], event
        assert within is None or copy.is_relative_to(within), event
        assert not copy.exists(), "a node's copy of the key outlived the run"
    key = key_file.read_text().strip().encode()
    leaked = [path for path in panel.run_dir.rglob("*") if path.is_file() and path != key_file
              and key in path.read_bytes()]
    assert leaked == []
    return starts


def test_caps_held_per_node_and_results_come_home(ray_panel, sleep_image, containers_of):
    tasks = [f"r{i}" for i in range(10)]
    panel = ray_panel(tasks, image=sleep_image, phases=PHASES, max_active_tasks=20)
    assert panel.run() == dict.fromkeys(tasks, "finished")
    run_dir, run_id = panel.run_dir, panel.config.run_id

    recorded = manifest(run_dir)
    assert set(recorded["nodes"]) == set(SESSION_NODES), "attempts ran only on the nodes with guest slots"
    slots = {orjson.loads((run_dir / "tasks" / task / "placement.json").read_bytes())["slot"] for task in tasks}
    assert len(slots) == sum(spec["slots"] for spec in SESSION_NODES.values()), "a finished attempt's slot is reused"
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
    assert run_handles(run_id) == [], "attempt slots and node agents are gone"
    assert containers_of(run_id) == []
    secret_checks(panel)


@pytest.fixture
def loss_nodes(ray_cluster):
    """Two nodes of their own (one guest slot each, a slot resource no other test uses), one to lose."""
    for name in LOSS_NODES:
        ray_cluster.add_node(name, 1, resource=LOSS_SLOT)
    yield ray_cluster
    for name in LOSS_NODES:
        ray_cluster.remove_node(name)


LOSS_SLOT = "hcu_loss_slot"
LOSS_NODES = ("node-c", "node-d")


def in_agent_on_a_node(run_dir) -> tuple[str, str] | None:
    """(task, node) of an attempt the head sees in its agent phase on a known node."""
    for task_dir in sorted(run_dir.glob("tasks/*")):
        try:
            placement = orjson.loads((task_dir / "placement.json").read_bytes())
            phase = orjson.loads((task_dir / "progress.json").read_bytes())["phase"]
        except (FileNotFoundError, orjson.JSONDecodeError):
            continue
        if placement["node"] and phase == "agent":
            return task_dir.name, placement["node"]
    return None


def test_node_lost_mid_attempt_reruns_elsewhere(ray_panel, loss_nodes, sleep_image, containers_of):
    phases = {"boot": (0.2, 0.3), "agent": (8.0, 9.0), "evaluate": (0.1, 0.2)}
    panel = ray_panel(["x0", "x1"], image=sleep_image, phases=phases, max_active_tasks=2,
                      ray={"slot_resource": LOSS_SLOT})
    queue = panel.start()
    run_dir, run_id = panel.run_dir, panel.config.run_id
    wait_for(lambda: in_agent_on_a_node(run_dir) is not None, 90, "an attempt in its agent phase")
    lost_task, lost_node = in_agent_on_a_node(run_dir)
    loss_nodes.kill_raylet(lost_node)
    assert queue.wait(timeout=240) == 0, queue.stderr.read().decode()

    other_node = next(name for name in LOSS_NODES if name != lost_node)
    retry = run_dir / "retries" / f"{lost_task}-1"
    assert orjson.loads((retry / "retry.json").read_bytes())["failure_classification"] == "node_lost"
    assert orjson.loads((retry / "placement.json").read_bytes())["node"] == lost_node
    assert not (retry / "result.json").exists(), "the lost attempt left no result to score"
    final = orjson.loads((run_dir / "tasks" / lost_task / "result.json").read_bytes())
    assert (final["attempt"], final["status"]) == (2, "completed")
    assert manifest(run_dir)["attempt_nodes"][f"{run_id}/{lost_task}/2"] == other_node

    events = [(e["task_id"], e["attempt"], e["event"]) for e in panel.events()]
    survivor = next(task for task in ("x0", "x1") if task != lost_task)
    assert sorted(events) == sorted([(lost_task, 1, "start"), (lost_task, 2, "start"), (lost_task, 2, "end"),
                                     (survivor, 1, "start"), (survivor, 1, "end")])
    summary = summarize(run_dir)
    assert (summary["valid"], summary["attempts"], summary["retried_tasks"]) == (2, 3, 1)
    done = next(e for e in panel.queue_events() if e["event"] == "done")
    assert f"{run_id}/{lost_task}/1" in done["leftovers_removed"], "the lost attempt's container was swept"
    assert containers_of(run_id) == []
    assert run_handles(run_id) == []


def test_a_node_agent_dying_on_a_live_node_interrupts_its_attempts(ray_panel):
    """The agent that runs a node's attempts dies while the node lives: its attempts are `interrupted` (not
    node_lost), run again, and the next one placed there gets a new agent."""
    panel = ray_panel(["i0", "i1"], phases={"boot": (0.1, 0.2), "agent": (6.0, 7.0)}, max_active_tasks=2)
    queue = panel.start()
    run_dir, run_id = panel.run_dir, panel.config.run_id
    wait_for(lambda: in_agent_on_a_node(run_dir) is not None, 90, "an attempt in its agent phase")
    task, _ = in_agent_on_a_node(run_dir)
    node_id = orjson.loads((run_dir / "tasks" / task / "placement.json").read_bytes())["ray_node_id"]
    ray.kill(ray.get_actor(f"node:{run_id}/{node_id}", namespace="hcu"))
    assert queue.wait(timeout=180) == 0, queue.stderr.read().decode()

    notes = [orjson.loads(p.read_bytes()) for p in sorted((run_dir / "retries").glob("*/retry.json"))]
    assert f"{task}-1" in {p.parent.name for p in (run_dir / "retries").glob("*/retry.json")}
    assert {note["failure_classification"] for note in notes} == {"interrupted"}, notes
    final = orjson.loads((run_dir / "tasks" / task / "result.json").read_bytes())
    assert (final["attempt"], final["status"]) == (2, "completed")
    assert summarize(run_dir)["valid"] == 2
    assert run_handles(run_id) == []


def test_a_slot_no_launch_takes_is_given_back_while_the_run_goes_on(ray_panel, tmp_path):
    """Two attempts, nothing left to launch: the slot of the one that finished is removed at the next poll, while
    the other still holds its own."""
    release = tmp_path / "release"
    panel = ray_panel(["quick", "held"], max_active_tasks=2, scenario={"wait_file": {"held": str(release)}})
    queue = panel.start()
    run_id = panel.config.run_id
    slot_of = {task: panel.run_dir / "tasks" / task / "placement.json" for task in ("quick", "held")}
    wait_for(lambda: (panel.run_dir / "tasks" / "quick" / "result.json").exists(), 90, "the quick attempt's result")
    held = orjson.loads(slot_of["held"].read_bytes())["slot"]
    wait_for(lambda: [name for name in run_handles(run_id) if name.startswith("slot:")] == [held], 30,
             "only the running attempt's slot left")
    release.touch()
    assert queue.wait(timeout=60) == 0, queue.stderr.read().decode()
    assert run_handles(run_id) == []


def test_killed_queue_restarts_and_adopts_cluster_attempts(ray_panel):
    tasks = ["k0", "k1", "k2"]
    panel = ray_panel(tasks, phases={"boot": (0.2, 0.3), "agent": (6.0, 7.0)}, max_active_tasks=5)
    queue = panel.start()
    placements = [panel.run_dir / "tasks" / task / "placement.json" for task in tasks]

    def placed() -> bool:
        found = [orjson.loads(p.read_bytes()) for p in placements if p.exists()]
        return len(found) == len(tasks) and all(p["node"] for p in found)

    wait_for(placed, 90, "every attempt on a node")
    queue.kill()
    queue.wait(timeout=20)
    slots = {orjson.loads(p.read_bytes())["slot"] for p in placements}
    assert len(slots) == len(tasks) and slots <= set(run_handles(panel.config.run_id)), "slots died with the queue"
    assert not any((panel.run_dir / "tasks" / task / "result.json").exists() for task in tasks)

    queue = panel.start()
    assert queue.wait(timeout=120) == 0, queue.stderr.read().decode()
    adopted = sorted(e["task_id"] for e in panel.queue_events() if e["event"] == "adopt")
    assert adopted == tasks
    started = sorted((e["task_id"], e["attempt"]) for e in panel.events() if e["event"] == "start")
    assert started == [(task, 1) for task in tasks], "adopted, not started again"
    assert not (panel.run_dir / "retries").exists()
    assert all(r["status"] == "completed" for r in results(panel.run_dir)) and len(results(panel.run_dir)) == 3
    assert len(manifest(panel.run_dir)["starts"]) == 2


def test_results_through_a_shared_directory(ray_panel, tmp_path):
    shared = tmp_path / "shared"
    panel = ray_panel(["s0", "s1"], ray={"shared_dir": str(shared)}, max_active_tasks=2)
    assert panel.run() == {"s0": "finished", "s1": "finished"}
    for task in ("s0", "s1"):
        assert {"result.json", "attempt.json"} <= {p.name for p in (panel.run_dir / "tasks" / task).iterdir()}
        lease = orjson.loads((panel.run_dir / "tasks" / task / "attempt.json").read_bytes())
        assert lease["result_dir"].startswith(str(shared)), "the node wrote into the shared directory"
    leftover = list((shared / panel.config.run_id / "attempts").iterdir())
    assert leftover == [], "the nodes' copies are discarded once home"
    secret_checks(panel, within=shared / panel.config.run_id)


def test_node_gateways_serve_with_the_run_scope_key(ray_panel):
    """Each node's gateway holds the run's key and its runners issue secrets it accepts; the upstream credential
    reaches the gateway only."""
    gateway = {"upstream_args": ["--upstreams", "127.0.0.1:9", "--upstream-kind", "openai", "--upstream-scheme",
                                 "http"], "upstream_token_env": UPSTREAM_TOKEN_ENV}
    tasks = ["n0", "n1", "n2"]
    panel = ray_panel(tasks, ray={"node_gateway": gateway}, gateway=None, ask_gateway=True, max_active_tasks=3)
    assert panel.run() == dict.fromkeys(tasks, "finished")
    starts = secret_checks(panel)
    assert {event["gateway_key_id"] for event in starts} == {starts[0]["key_id"]}, "a node gateway without it"
    assert not any(event["credential_in_env"] for event in starts), "the upstream credential reached a runner"


def test_a_node_gateway_that_cannot_start_is_an_infrastructure_failure(ray_panel):
    gateway = {"upstream_args": ["--upstreams", "127.0.0.1:9", "--upstream-kind", "openai"],
               "upstream_token_env": "HCU_TEST_NOT_SET_ON_ANY_NODE"}
    panel = ray_panel(["g"], ray={"node_gateway": gateway}, gateway=None)
    assert panel.run() == {"g": "exhausted"}
    notes = [orjson.loads(p.read_bytes()) for p in sorted((panel.run_dir / "retries").glob("g-*/retry.json"))]
    assert [note["failure_classification"] for note in notes] == ["gateway"] * 4
    assert "HCU_TEST_NOT_SET_ON_ANY_NODE is not set on node" in notes[0]["reason"]
    assert panel.events() == [], "no runner started without its gateway"


def test_a_configuration_failure_stops_launches_on_ray(ray_panel):
    """Issue 14's table on Ray: an attempt that ends on `configuration` on a node stops launches (nothing more
    starts anywhere), is set aside, and the run's node agents stop; started again, the queue runs the rest."""
    missing = {"status": "error", "score": None, "failure_classification": "configuration",
               "failure_message": "kvm is missing on this node"}
    tasks = ["c0", "c1", "c2"]
    panel = ray_panel(tasks, max_active_tasks=1, outcomes={"c0": [missing, {"status": "completed", "score": 1.0}]})
    with pytest.raises(QueueStopped) as stopped:
        panel.run()
    assert str(stopped.value) == "launches stopped: task c0: kvm is missing on this node"
    assert [e["task_id"] for e in panel.events() if e["event"] == "start"] == ["c0"], "nothing more launched"
    retry = panel.run_dir / "retries" / "c0-1"
    assert orjson.loads((retry / "retry.json").read_bytes())["failure_classification"] == "configuration"
    assert (retry / "placement.json").exists() and (retry / "result.json").exists(), "the node's result came home"
    assert run_handles(panel.config.run_id) == [], "attempt slots and node agents are gone"
    assert panel.run() == dict.fromkeys(tasks, "finished")
    assert sorted((e["task_id"], e["attempt"]) for e in panel.events() if e["event"] == "start") == [
        ("c0", 1), ("c0", 2), ("c1", 1), ("c2", 1)]


def test_repeats_on_ray_come_home_under_their_own_names(ray_panel, sleep_image, containers_of):
    guest_fail = {"status": "error", "score": None, "failure_classification": "guest"}
    panel = ray_panel(["q0", "q1"], image=sleep_image, repeats=2, max_active_tasks=4, sleep_sec=(0.2, 0.4),
                      outcomes={"q1.r2": [guest_fail, {}]})
    keys = ["q0", "q0.r2", "q1", "q1.r2"]
    assert panel.run() == dict.fromkeys(keys, "finished")
    run_dir, run_id = panel.run_dir, panel.config.run_id
    attempts = {"q0": 1, "q0.r2": 1, "q1": 1, "q1.r2": 2}
    assert sorted(manifest(run_dir)["attempt_nodes"]) == sorted(
        [f"{run_id}/{key}/{n}" for key, n in attempts.items()] + [f"{run_id}/q1.r2/1"])
    for key, attempt in attempts.items():
        placement = orjson.loads((run_dir / "tasks" / key / "placement.json").read_bytes())
        result = orjson.loads((run_dir / "tasks" / key / "result.json").read_bytes())
        assert placement["attempt_id"] == result["attempt_id"] == f"{run_id}/{key}/{attempt}"
        assert placement["repeat"] == result["repeat"] == (2 if key.endswith(".r2") else 1)
        assert f"=== attempt {attempt} launched" in (run_dir / "logs" / f"{key}.log").read_text()
    assert orjson.loads((run_dir / "retries" / "q1.r2-1" / "retry.json").read_bytes())["repeat"] == 2
    assert summarize(run_dir)["repeats"] == 2
    assert run_handles(run_id) == [] and containers_of(run_id) == []
