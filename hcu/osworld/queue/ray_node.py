"""What runs on a Ray node: one `NodeAgent` actor per run and node, running that node's attempts.

Each attempt holds one of the run's guest slots (the node's `slot_resource`, through a detached placement group
the head keeps: ray_slots.py) and is named `attempt:<run>/<task>/<n>`; once Ray has placed the slot, the head
asks the run's agent on that node to start it. The agent (`node:<run>/<node id>`, detached, threaded) starts the
runner (run_task, or the stand-in the tests give) through the keeper with the node's gateway, the run's scope key
file on this node, a node-local result directory and the node's phase caps, then answers the head per attempt:
status (a long poll), collect (the files, the log and the token rows), discard, end. It also owns what an attempt
must not: the run's scope key and gateway on this node and the removal of containers whose attempt is gone. One
warm process per node serves every attempt there, so an attempt costs no Ray worker start; what is per node (the
host check, the node's description) is worked out once.

Both the slot reservations and the agent outlive a killed queue, and a new one finds them by name. The agent
exits when its raylet dies: a worker blocked in a call never notices, so a watchdog thread checks the parent,
and the keepers' parent-death signal then stops the runners gracefully. Plain classes here; the head makes the
agent a Ray actor (`ray.remote`), so this module imports Ray only inside functions that run on a node.
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

from hcu.osworld.attempt.node_admission import AdmissionSettings, NodeCaps
from hcu.osworld.errors import HcuOSWorldError
from hcu.osworld.guest.kinds import check_host
from hcu.osworld.guest.state_dir import state_dir
from hcu.osworld.queue import keeper
from hcu.osworld.queue.containers import cleanup_attempt, run_attempts_with_containers
from hcu.osworld.queue.keeper import die_with_parent
from hcu.osworld.queue.launch import runner_args, spawn
from hcu.osworld.queue.merge import pack_attempt, scope_rows
from hcu.osworld.queue.node_gateway import NodeGatewayProcess, without_upstream_credentials
from hcu.osworld.queue.node_key import ShippedKey, node_key_file, remove_key
from hcu.osworld.quota.gateway_reading import fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.run_config import RunConfig

NODE_LABEL = "hcu/node"
"""A node's name in manifests and status (`ray start --labels hcu/node=gpu-host-07`)."""
WATCHDOG_SEC = 1.0
AGENT_SPARE_THREADS = 8
"""Calls a node agent serves beside its attempts' long polls (start, collect, sweep, cleanup, stop)."""


def attempt_name(attempt: AttemptId) -> str:
    """The attempt's name in Ray: of its runner on the node."""
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


def node_agent(config: RunConfig, ray_node_id: str, slots: float = 0) -> Any:
    """The run's agent on a node, created there if it is not yet (by whichever asks first). `slots`: the
    node's guest slots, so that every attempt there can hold a long poll at once (each call holds a thread)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    assert config.ray is not None
    return ray.remote(NodeAgent).options(
        name=node_agent_name(str(config.run_id), ray_node_id), namespace=config.ray.namespace,
        lifetime="detached", get_if_exists=True, num_cpus=0, max_restarts=0,
        max_concurrency=int(slots) + AGENT_SPARE_THREADS,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node_id, soft=False),
    ).remote(config.model_dump_json())


class AttemptGone(HcuOSWorldError, LookupError):
    """The node's agent runs no attempt of that name (it never started there, or a restarted agent lost it)."""


class AttemptRunner:
    """One attempt on this node: its runner (under the keeper), its node-side result directory and log."""

    def __init__(self, config: RunConfig, node_id: str, node: NodeInfo, task_id: str, attempt: int,
                 runner: list[str] | None, repeat: int) -> None:
        self.config, self.node_id, self.node = config, node_id, node
        self.task = next(task for task in config.tasks if task.id == task_id)
        self.id = AttemptId(run_id=str(config.run_id), task_id=task_id, attempt=attempt, repeat=repeat)
        self.runner = runner or [sys.executable, "-m", "hcu.osworld.run_task"]
        attempts = run_root(config) / "attempts"
        self.result_dir = attempts / f"{self.id.task_key}-{attempt}"
        self.log_path = attempts / f"{self.id.task_key}-{attempt}.log"
        self.keeper: subprocess.Popen[bytes] | None = None
        self.token_log: Path | None = None

    def start(self, gateway: str | None, token_log: str | None, key_file: str | None) -> None:
        """Start the runner with this node's gateway, token log and copy of the scope key."""
        self.token_log = Path(token_log) if token_log else None
        settings = self.config.model_copy(update={
            "gateway": gateway, "token_log": self.token_log, "scope_key_file": Path(key_file) if key_file else None})
        argv = self.runner + runner_args(settings, self.task, self.id.attempt, self.result_dir, repeat=self.id.repeat)
        lock_dir = state_dir() / "admission" / self.node_id
        env = {**without_upstream_credentials(self.config, dict(os.environ)),
               **AdmissionSettings(lock_dir=lock_dir, caps=NodeCaps(**self.node.caps)).env()}
        self.result_dir.mkdir(parents=True, exist_ok=True)
        # the parent-death signal follows the thread that forks: the actor's call threads live as long as it does
        # the keeper needs only the standard library: started as a file without site-packages, it starts sooner
        self.keeper = spawn([sys.executable, "-I", "-S", keeper.__file__, "--", *argv], self.log_path,
                            self.id.attempt, env=env, preexec_fn=die_with_parent())

    def placed(self) -> dict[str, Any]:
        assert self.keeper is not None
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

    def end(self) -> None:
        """Stop the runner gracefully (the keeper passes SIGTERM on: it records the attempt interrupted and
        removes its guest)."""
        if self.keeper is not None and self.keeper.poll() is None:
            self.keeper.terminate()


class NodeAgent:
    """One run on this node: its attempts' runners, its gateway, and removal of containers whose attempt is
    gone. Threaded: each attempt's long poll holds one call thread."""

    def __init__(self, config_json: str) -> None:
        exit_with_raylet()
        self.config = RunConfig.model_validate_json(config_json)
        assert self.config.ray is not None
        self.ray_node_id, self.node = this_node(self.config.ray.slot_resource)
        self.gateway_process = NodeGatewayProcess(self.config, run_root(self.config) / "nodes" / self.ray_node_id)
        self.attempts: dict[str, AttemptRunner] = {}
        self.host_checked = False
        self.lock = threading.Lock()
        """One start at a time: the gateway starts once, and an attempt's name is taken once."""

    def start(self, name: str, config_json: str, task_id: str, attempt: int, runner: list[str] | None,
              repeat: int, key: ShippedKey | None) -> dict[str, Any]:
        """Start the attempt `name` (once; a second call, from a queue that adopted it, only reports) with the
        run's config as the head has it now. `key`: the run's scope key when it travels through Ray
        (node_key.py)."""
        with self.lock:
            if name not in self.attempts:
                config = RunConfig.model_validate_json(config_json)
                if not self.host_checked:  # this node can run the config's guests (the head maps a refusal)
                    check_host(config)
                    self.host_checked = True
                gateway = self._gateway(key)
                runner_of = AttemptRunner(config, self.ray_node_id, self.node, task_id, attempt, runner, repeat)
                runner_of.start(*gateway)
                self.attempts[name] = runner_of
            return self.attempts[name].placed()

    def _attempt(self, name: str) -> AttemptRunner:
        try:
            return self.attempts[name]
        except KeyError:
            raise AttemptGone(f"no attempt {name} runs on this node") from None

    def placed(self, name: str) -> dict[str, Any]:
        """Where and as which process the attempt runs (for a queue adopting it)."""
        return self._attempt(name).placed()

    def status(self, name: str, wait_sec: float) -> dict[str, Any]:
        return self._attempt(name).status(wait_sec)

    def collect(self, name: str) -> dict[str, Any]:
        return self._attempt(name).collect()

    def discard(self, name: str) -> None:
        """The head has the attempt: its node-side copy goes."""
        self._attempt(name).discard()
        del self.attempts[name]

    def end(self, name: str) -> None:
        """The head gave the attempt up (it is lost or no longer its task's current one): its runner stops."""
        if (runner_of := self.attempts.pop(name, None)) is not None:
            runner_of.end()

    def _gateway(self, key: ShippedKey | None) -> tuple[str | None, str | None, str | None]:
        """(gateway URL, token log path, scope key file) for this node's runners: the node's own gateway when
        the config asks for one (started again if it died), else the config's; the run's key written here
        first when it was shipped."""
        key_file = node_key_file(run_root(self.config), key, secrets_on=self.config.scope_key_file is not None)
        if not self.config.node_gateways:
            token_log = self.config.token_log
            return self.config.gateway, str(token_log) if token_log else None, str(key_file) if key_file else None
        url = self.gateway_process.ensure(key_file)
        return url, str(self.gateway_process.token_log), str(key_file) if key_file else None

    def gateway_report(self) -> dict[str, Any] | None:
        """What this node's gateway reports on the run's scopes and its upstreams' limits, read here, on its host
        (None: the run has no node gateways, or it does not answer)."""
        if not self.config.node_gateways or not self.gateway_process.url:
            return None
        report = fetch_report(self.gateway_process.url, f"{self.config.run_id}.")
        return None if report is None else report.model_dump(mode="json")

    def sweep(self, live: list[str]) -> list[tuple[str, int, int]]:
        """Stop this node's runners, and remove this run's containers on this node's engine, whose attempt is
        not in `live` (attempt names); returns (task id, repeat, attempt) of each container's attempt."""
        for name in set(self.attempts) - set(live):
            self.end(name)
        removed = []
        for attempt_id in sorted(run_attempts_with_containers(str(self.config.run_id)), key=str):
            if attempt_name(attempt_id) not in live:
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
