"""A Ray cluster on this machine for the queue's executor tests: Ray's own test cluster (ray.cluster_utils),
every node on loopback and sharing this machine's Docker engine, usage stats off.

The head has no guest slots (the queue runs there, as on a real cluster); the session's two nodes each have
their own slot count, caps and name. Tests that kill a node add their own nodes (another slot resource), so
the session's nodes stay up for the others.
"""

from __future__ import annotations

import os
import signal
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest

from hcu.demo.stand_in import STAND_IN_TOKEN

SLOT = "hcu_guest_slot"
UPSTREAM_TOKEN_ENV = "HCU_TEST_UPSTREAM_TOKEN"
"""The scripted upstream's credential, in every node's environment as a real one would be."""
SESSION_NODES = {
    "node-a": {"slots": 3, "caps": {"hcu/boot-setup-cap": "1", "hcu/agent-cap": "2", "hcu/evaluate-cap": "1"}},
    "node-b": {"slots": 2, "caps": {"hcu/boot-setup-cap": "1", "hcu/agent-cap": "1", "hcu/evaluate-cap": "1"}},
}
LOOPBACK = "127.0.0.1"


def ray_environment() -> None:
    """Set before Ray starts (its processes inherit it): no usage stats, Ray's address canonicalisation kept
    on loopback (on Linux it swaps 127.0.0.1 for the host's routable address unless told this is a
    single-machine cluster), and the nodes' upstream credential."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ[UPSTREAM_TOKEN_ENV] = STAND_IN_TOKEN


def import_ray() -> Any:
    try:
        import ray
        from ray import cluster_utils
    except ImportError:
        pytest.fail("ray is not installed: pip install -e '.[ray]' (make test installs it)")
    return ray, cluster_utils


@dataclass
class TestCluster:
    cluster: Any
    nodes: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self, name: str, slots: int, resource: str = SLOT, caps: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> Any:
        """`env`: added to the node's processes' environment (what that host would have)."""
        node = self.cluster.add_node(num_cpus=0, node_ip_address=LOOPBACK, resources={resource: slots},
                                     labels={"hcu/node": name, **(caps or {})}, env_vars=env)
        self.nodes[name] = node
        return node

    def kill_raylet(self, name: str) -> None:
        """SIGKILL one node's raylet, as a crashed host would lose it."""
        from ray._private import ray_constants

        raylet = self.nodes[name].all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
        os.kill(raylet.pid, signal.SIGKILL)

    def remove_node(self, name: str) -> None:
        """Stop what is left of a node (all of it, or what survived its raylet)."""
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)


def start_cluster(nodes: dict[str, dict[str, Any]] | None = None) -> TestCluster:
    """`nodes`: name -> {"slots", "caps"} of the worker nodes (by default the session's)."""
    ray_environment()
    _, cluster_utils = import_ray()
    temp_dir = tempfile.mkdtemp(prefix="hcu-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    # Ray records the newest cluster's address in <its default temp dir>/ray/ray_current_cluster, a folder it
    # never creates: keep that in this session's folder, not in a /tmp/ray another user's ray.init() reads
    os.environ["RAY_TMPDIR"] = temp_dir
    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": LOOPBACK, "include_dashboard": False, "temp_dir": temp_dir})
    test_cluster = TestCluster(cluster)
    for name, spec in (SESSION_NODES if nodes is None else nodes).items():
        test_cluster.add_node(name, spec["slots"], caps=spec["caps"])
    return test_cluster
