"""What runs on a Ray node: one `AttemptRunner` actor per attempt and one `NodeAgent` actor per run and node.

`AttemptRunner` holds one guest slot (the node's `slot_resource`) for the life of the attempt. It starts the
runner (run_task, or the stand-in the tests give) through the keeper with the node's gateway, the run's scope
key file on this node, a node-local result directory and the node's phase caps, then answers the head: status
(a long poll), collect (the files, the log and the token rows), discard. `NodeAgent` owns what an attempt must
not: the run's scope key and gateway on this node and the removal of containers whose attempt is gone.

Both are detached and named (`attempt:<run>/<task>/<n>`, `node:<run>/<node id>`), so they outlive a killed
queue and a new one finds them. Both exit when their raylet dies: a worker blocked in a call never notices,
so a watchdog thread checks the parent, and the keeper's parent-death signal then stops the runner
gracefully. Plain classes here; the head makes them Ray actors (`ray.remote`), so this module imports Ray only
inside methods that run on a node.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from hcu.osworld.attempt.identity import AttemptId
from hcu.osworld.guest.host import check_host
from hcu.osworld.guest.state_dir import state_dir
from hcu.osworld.queue.admission import AdmissionSettings, NodeCaps
from hcu.osworld.queue.config import RunConfig
from hcu.osworld.queue.containers import cleanup_attempt, run_attempts_with_containers
from hcu.osworld.queue.keeper import die_with_parent
from hcu.osworld.queue.launch import runner_args, spawn
from hcu.osworld.queue.manifest import NodeInfo
from hcu.osworld.queue.merge import pack_attempt, scope_rows
from hcu.osworld.queue.node_gateway import NodeGatewayProcess, without_upstream_credentials
from hcu.osworld.queue.node_key import ShippedKey, node_key_file, remove_key

NODE_LABEL = "hcu/node"
"""A node's name in manifests and status (`ray start --labels hcu/node=gpu-host-07`)."""
WATCHDOG_SEC = 1.0
GATEWAY_TIMEOUT_SEC = 90.0


def attempt_actor_name(attempt: AttemptId) -> str:
    return f"attempt:{attempt}"


def node_agent_name(run_id: str, ray_node_id: str) -> str:
    return f"node:{run_id}/{ray_node_id}"


def run_root(config: RunConfig) -> Path:
    """Where this node keeps the run's attempts and gateway: the shared directory, else the hcu state dir."""
    assert config.ray is not None
    return (config.ray.shared_dir or state_dir() / "ray") / str(config.run_id)


def exit_with_raylet() -> None:
    """End this worker when its raylet (the parent) dies; a worker blocked in a call would stay forever."""
    raylet = os.getppid()

    def watch() -> None:
        while os.getppid() == raylet:
            time.sleep(WATCHDOG_SEC)
        os._exit(1)

    threading.Thread(target=watch, name="hcu-raylet-watchdog", daemon=True).start()


def this_node(slot_resource: str) -> tuple[str, NodeInfo]:
    """(Ray node id, how the manifest names and describes this node)."""
    import ray

    context = ray.get_runtime_context()
    node_id, labels = context.get_node_id(), context.get_node_labels()
    node = next((n for n in ray.nodes() if n["NodeID"] == node_id), {})
    address = str(node.get("NodeManagerAddress") or "")
    caps = NodeCaps.from_labels(labels)
    return node_id, NodeInfo(name=labels.get(NODE_LABEL) or f"{address}-{node_id[:8]}",
                             host=socket.gethostname(), address=address, ray_node_id=node_id,
                             slots=node.get("Resources", {}).get(slot_resource), caps=caps.model_dump())


def node_agent(config: RunConfig, ray_node_id: str) -> Any:
    """The run's agent on a node, created there if it is not yet (by whichever asks first)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    assert config.ray is not None
    return ray.remote(NodeAgent).options(
        name=node_agent_name(str(config.run_id), ray_node_id), namespace=config.ray.namespace,
        lifetime="detached", get_if_exists=True, num_cpus=0, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node_id, soft=False),
    ).remote(config.model_dump_json())


class AttemptRunner:
    """One attempt on this node (a detached actor holding one guest slot)."""

    def __init__(self, config_json: str, task_id: str, attempt: int, runner: list[str] | None,
                 repeat: int = 1) -> None:
        exit_with_raylet()
        self.config = RunConfig.model_validate_json(config_json)
        self.task = next(task for task in self.config.tasks if task.id == task_id)
        self.id = AttemptId(run_id=str(self.config.run_id), task_id=task_id, attempt=attempt, repeat=repeat)
        self.runner = runner or [sys.executable, "-m", "hcu.osworld.run_task"]
        attempts = run_root(self.config) / "attempts"
        self.result_dir = attempts / f"{self.id.task_key}-{attempt}"
        self.log_path = attempts / f"{self.id.task_key}-{attempt}.log"
        self.keeper: subprocess.Popen[bytes] | None = None
        self.node: NodeInfo | None = None
        self.token_log: Path | None = None

    def start(self, key: ShippedKey | None) -> dict[str, Any]:
        """Start the runner (once; a second call, from a queue that adopted this attempt, only reports).
        `key`: the run's scope key when it travels through Ray (node_key.py)."""
        if self.keeper is None:
            import ray

            assert self.config.ray is not None
            check_host(self.config)  # this node can run the config's guests (the head maps a refusal)
            node_id, self.node = this_node(self.config.ray.slot_resource)
            agent = node_agent(self.config, node_id)
            gateway, token_log, key_file = ray.get(agent.gateway.remote(key), timeout=GATEWAY_TIMEOUT_SEC)
            self.token_log = Path(token_log) if token_log else None
            settings = self.config.model_copy(update={
                "gateway": gateway, "token_log": self.token_log,
                "scope_key_file": Path(key_file) if key_file else None})
            argv = self.runner + runner_args(settings, self.task, self.id.attempt, self.result_dir,
                                             repeat=self.id.repeat)
            lock_dir = state_dir() / "admission" / node_id
            env = {**without_upstream_credentials(self.config, dict(os.environ)),
                   **AdmissionSettings(lock_dir=lock_dir, caps=NodeCaps(**self.node.caps)).env()}
            self.result_dir.mkdir(parents=True, exist_ok=True)
            self.keeper = spawn([sys.executable, "-m", "hcu.osworld.queue.keeper", "--", *argv], self.log_path,
                                self.id.attempt, env=env, preexec_fn=die_with_parent())
        assert self.node is not None
        return {"node": self.node.model_dump(mode="json"), "pid": self.keeper.pid}

    def status(self, wait_sec: float) -> dict[str, Any]:
        """Whether the runner has exited (waiting up to `wait_sec` for it), and its current phase."""
        assert self.keeper is not None, "start() first"
        try:
            code: int | None = self.keeper.wait(timeout=wait_sec)
        except subprocess.TimeoutExpired:
            code = None
        try:
            progress = orjson.loads((self.result_dir / "progress.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            progress = None
        return {"exit": code, "progress": progress}

    def collect(self) -> dict[str, Any]:
        """The finished attempt: its files (or their shared path), its runner log, its token-log rows."""
        shared = self.config.ray is not None and self.config.ray.shared_dir is not None
        own_log = self.config.node_gateways and self.token_log is not None  # else the rows are the run's already
        rows = scope_rows(self.token_log, self.id.gateway_scope) if own_log and self.token_log else b""
        return {"files": None if shared else pack_attempt(self.result_dir),
                "path": str(self.result_dir) if shared else None,
                "log": self.log_path.read_bytes() if self.log_path.exists() else b"", "token_rows": rows}

    def discard(self) -> None:
        """Remove the attempt's node-side copy once the head has it."""
        shutil.rmtree(self.result_dir, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)


class NodeAgent:
    """One run on this node: its gateway, and removal of containers whose attempt is gone."""

    def __init__(self, config_json: str) -> None:
        exit_with_raylet()
        import ray

        self.config = RunConfig.model_validate_json(config_json)
        self.ray_node_id = ray.get_runtime_context().get_node_id()
        self.gateway_process = NodeGatewayProcess(self.config, run_root(self.config) / "nodes" / self.ray_node_id)

    def gateway(self, key: ShippedKey | None) -> tuple[str | None, str | None, str | None]:
        """(gateway URL, token log path, scope key file) for this node's runners: the node's own gateway when
        the config asks for one, else the config's; the run's key written here first when it was shipped."""
        key_file = node_key_file(run_root(self.config), key, secrets_on=self.config.scope_key_file is not None)
        if not self.config.node_gateways:
            token_log = self.config.token_log
            return self.config.gateway, str(token_log) if token_log else None, str(key_file) if key_file else None
        url = self.gateway_process.ensure(key_file)
        return url, str(self.gateway_process.token_log), str(key_file) if key_file else None

    def sweep(self, live: list[str]) -> list[tuple[str, int, int]]:
        """Remove this run's containers on this node's engine whose attempt is not in `live` (actor names);
        returns (task id, repeat, attempt) of each."""
        removed = []
        for attempt_id in sorted(run_attempts_with_containers(str(self.config.run_id)), key=str):
            if attempt_actor_name(attempt_id) not in live:
                cleanup_attempt(attempt_id)
                removed.append((attempt_id.task_id, attempt_id.repeat, attempt_id.attempt))
        return removed

    def cleanup(self, task_id: str, attempt: int, repeat: int = 1) -> None:
        cleanup_attempt(AttemptId(run_id=str(self.config.run_id), task_id=task_id, attempt=attempt, repeat=repeat))

    def stop(self) -> None:
        """The run is over on this node: its gateway stops and its copy of the scope key goes."""
        self.gateway_process.stop()
        if self.config.ray is not None and self.config.ray.shared_dir is None:  # else the head's copy: it removes it
            remove_key(run_root(self.config))
