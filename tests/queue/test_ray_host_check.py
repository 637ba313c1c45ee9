"""The host check on each Ray node: a node that could not give the official guest KVM refuses its attempt before
any runner starts there, and the queue stops launches with that one line (a `configuration` failure), as a local
queue does before its first launch. The node's cpuinfo is one of the test's own ($HCU_HOST_PROC in its
environment)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from hcu.osworld.guest.host import HOST_PROC_ENV
from hcu.osworld.queue.panel import QueueStopped
from tests.guest.host_files import host_proc

pytestmark = [pytest.mark.docker, pytest.mark.ray]

NO_KVM_SLOT = "hcu_no_kvm_slot"
NO_KVM_NODE = "node-no-kvm"


@pytest.fixture
def no_kvm_node(ray_cluster: Any, tmp_path: Path) -> Iterator[Any]:
    """A node of its own (its own slot resource) whose CPU shows neither vmx nor svm."""
    proc = host_proc(tmp_path / "node-proc", flags="fpu vme de pse tsc hypervisor")
    ray_cluster.add_node(NO_KVM_NODE, 1, resource=NO_KVM_SLOT, env={HOST_PROC_ENV: str(proc)})
    yield ray_cluster
    ray_cluster.remove_node(NO_KVM_NODE)


def test_a_node_without_kvm_refuses_the_official_guest_and_launches_stop(ray_panel, no_kvm_node, tmp_path):
    panel = ray_panel(["k0", "k1"], max_active_tasks=1, ray={"slot_resource": NO_KVM_SLOT}, test_desktop=None,
                      guest_image=str(tmp_path / "guest.qcow2"), guest_docker_image="hcu-test-never-pulled:1")
    with pytest.raises(QueueStopped) as stopped:
        panel.run()
    assert str(stopped.value).startswith("launches stopped: task k0: KVM: ")
    assert "the official guest needs KVM" in str(stopped.value) and "\n" not in str(stopped.value)
    assert panel.events() == [], "no runner started on the node"
    note = orjson.loads((panel.run_dir / "retries" / "k0-1" / "retry.json").read_bytes())
    assert note["failure_classification"] == "configuration"
