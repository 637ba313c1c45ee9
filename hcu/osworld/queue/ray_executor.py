"""The ray executor: each attempt holds one of the run's guest slots on a node (a detached placement group)
and runs under the run's agent on that node (ray_node.NodeAgent), its results brought home into the same run
directory as the local executor's (merge.py).

- Slots (ray_slots.py): a finished attempt's slot goes to the run's next launch, already placed.
- Launch: placement.json (naming the slot) is written first, then the slot is taken or created (the queue
  launches no more attempts than the live nodes advertise slots, so a new one is placed at once). Once Ray has
  placed it, the head asks the node's agent (one warm process per run and node) to start the attempt.
- Progress: one long-polled `status` call per attempt at a time; its phase is mirrored to progress.json.
- Finish: collect, merge, discard the node's copy, free the slot (an attempt that ended without a result
  removes it).
- Per-task secrets: the run's scope key goes to every node with each start call, or through the shared
  directory (node_key.py); each node's gateway and runners use it, so no launch gate is needed on the head.
- Faults: an attempt whose agent died with a node Ray declared dead is `node_lost` (infrastructure, retried
  elsewhere); one whose runner or agent died on a live node is `interrupted`. A restarted queue finds live
  attempts by their slot's name and adopts them; the run's other slots are removed, an attempt that is no
  longer the task's current one is ended, and every live node's agent removes containers whose attempt is
  gone. A dead node's own containers die with it (or see docs/ray.md).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayError
from ray.util import list_named_actors
from ray.util.placement_group import PlacementGroup, placement_group_table

from hcu.gateway.scope_secret import ScopeKeyError
from hcu.osworld.attempt.node_admission import NodeCaps
from hcu.osworld.errors import ConfigurationError, FailureClass
from hcu.osworld.queue.executor import Lost, QueueRefused
from hcu.osworld.queue.launch import RUN_TASK
from hcu.osworld.queue.merge import append_log, append_rows, merged_scopes, unpack_into
from hcu.osworld.queue.node_gateway import NodeGatewayError
from hcu.osworld.queue.node_key import remove_key, ship_key
from hcu.osworld.queue.ray_node import AttemptGone, attempt_name, node_agent, node_agent_name, run_root
from hcu.osworld.queue.ray_reports import NodeReports
from hcu.osworld.queue.ray_slots import SlotPool
from hcu.osworld.queue.state import Placement, TaskView
from hcu.osworld.queue.status import ActiveAttempt
from hcu.osworld.quota.gateway_reading import GatewayReport, fetch_report
from hcu.osworld.records.identity import AttemptId
from hcu.osworld.records.manifest import NodeInfo
from hcu.osworld.run_config import RunConfig, TaskSpec
from hcu.record_io import write_json, write_record

STATUS_WAIT_SEC = 5.0
"""How long one status call waits on the node for the runner to exit (the head's poll is not slowed by it)."""
CALL_TIMEOUT_SEC = 120.0
CONNECT_TIMEOUT_SEC = 5.0
NODES_REFRESH_SEC = 2.0
PLACE_WAIT_SEC = 0.5
"""How long a launch waits for Ray to place its slot before leaving that to the next poll."""


def gcs_unreachable(address: str) -> str | None:
    """Why the head's GCS at host:port cannot be reached (None: it answers, or "auto" leaves it to Ray);
    ray.init itself retries an unreachable address for many minutes."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_SEC).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


@dataclass(frozen=True)
class _Ended:
    """Why an attempt's agent let it go; without a class, settle decides it (its node lost, or interrupted)."""

    classification: FailureClass | None
    reason: str


@dataclass
class _Remote:
    """The head's handle on one attempt: its slot reservation and, once placed, its node's agent."""

    group: PlacementGroup
    placement: Placement
    task_dir: Path
    agent: Any = None
    """The agent of the node the group is placed on (None until Ray has placed it)."""
    start_args: tuple[Any, ...] | None = None
    """What the agent starts the attempt with (None: an adopted attempt that ran already; it only reports)."""
    start_ref: Any = None
    status_ref: Any = None
    exit_code: int | None = None
    ended: _Ended | None = None
    """Set when the agent died or could not start the runner."""
    progress: dict[str, Any] = field(default_factory=dict)


class RayExecutor:
    name = "ray"

    def __init__(self, config: RunConfig, runner: Sequence[str] | None) -> None:
        assert config.ray is not None
        self.config, self.settings = config, config.ray
        self.runner = None if runner is None or list(runner) == list(RUN_TASK) else list(runner)
        self.owns_connection = not ray.is_initialized()  # a caller already connected keeps its connection
        if self.owns_connection and (unreachable := gcs_unreachable(self.settings.address)):
            raise QueueRefused(f"ray.address: cannot reach the Ray cluster at {self.settings.address} "
                               f"({unreachable})")
        try:
            if self.owns_connection:
                ray.init(address=self.settings.address, namespace=self.settings.namespace, log_to_driver=False,
                         logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise QueueRefused(f"ray.address: cannot join the Ray cluster at {self.settings.address} "
                               f"({type(exc).__name__})") from None
        self.remotes: dict[str, _Remote] = {}
        self.slots = SlotPool(str(config.run_id), self.settings.slot_resource)
        self.agents: dict[str, Any] = {}
        """The run's agent per Ray node id, as this head has asked for it."""
        self.known: dict[str, NodeInfo] = {}
        self.reports = NodeReports()
        self.merged = merged_scopes(config.token_log) if config.node_gateways else set()
        self._nodes: list[dict[str, Any]] = []
        self._nodes_at = 0.0
        for node in self._live_slot_nodes():  # refuse bad node settings before anything starts
            try:
                NodeCaps.from_labels(node.get("Labels") or {})
            except ValueError as exc:
                self.close(run_done=False)
                raise QueueRefused(f"Ray node {node['NodeManagerAddress']} ({node['NodeID'][:8]}): {exc}") from None
        self.shared_root = run_root(config) if self.settings.shared_dir is not None else None
        try:
            self.key = ship_key(config.scope_key_file, self.shared_root)
        except ScopeKeyError as exc:
            self.close(run_done=False)
            raise QueueRefused(f"scope_key_file: {exc}") from None

    # Capacity and nodes ---------------------------------------------------------------------------------------

    def _cluster_nodes(self) -> list[dict[str, Any]]:
        if time.monotonic() - self._nodes_at >= NODES_REFRESH_SEC:
            self._nodes, self._nodes_at = ray.nodes(), time.monotonic()
        return self._nodes

    def _live_slot_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self._cluster_nodes() if n["Alive"] and n["Resources"].get(self.settings.slot_resource)]

    def _node_alive(self, ray_node_id: str) -> bool:
        self._nodes_at = 0.0  # a death is being judged: ask the cluster now
        return any(n["NodeID"] == ray_node_id and n["Alive"] for n in self._cluster_nodes())

    def capacity(self) -> int | None:
        return int(sum(n["Resources"][self.settings.slot_resource] for n in self._live_slot_nodes()))

    def nodes(self) -> dict[str, NodeInfo]:
        return dict(self.known)

    def gateway_reports(self) -> list[GatewayReport] | None:
        """Each node's gateway as its agent reads it (ray_reports.py); without node gateways, `gateway`, if this
        head is its host."""
        if not self.config.node_gateways:
            report = fetch_report(str(self.config.gateway), f"{self.config.run_id}.")
            return None if report is None else [report]
        agents = {**{r.placement.ray_node_id: r.agent for r in self.remotes.values()  # adopted ones too
                     if r.agent is not None and r.placement.ray_node_id}, **self.agents}
        return self.reports.collect(agents)

    # Attempts -------------------------------------------------------------------------------------------------

    def launch(self, task: TaskSpec, attempt: AttemptId, task_dir: Path) -> ActiveAttempt:
        name, placed = self.slots.name_for_launch(node["NodeID"] for node in self._live_slot_nodes())
        placement = Placement(attempt_id=str(attempt), task_id=task.id, repeat=attempt.repeat,
                              attempt=attempt.attempt, actor_name=attempt_name(attempt), slot=name,
                              namespace=self.settings.namespace, launched_at=time.time())
        write_record(task_dir / "placement.json", placement)  # before a new group: a restart finds it by name
        group = self.slots.hold(name, attempt.task_key).group
        remote = _Remote(group, placement, task_dir, start_args=self._start_args(task, attempt))
        self.remotes[attempt.task_key] = remote
        with contextlib.suppress(RayError):  # placed at once when a slot is free; else at a later poll
            if placed or group.wait(timeout_seconds=PLACE_WAIT_SEC):
                self._place(remote)
        return ActiveAttempt(task.id, attempt.attempt, 0, placement.launched_at, False, task_dir, None,
                             attempt.repeat)

    def _start_args(self, task: TaskSpec, attempt: AttemptId) -> tuple[Any, ...]:
        config_json = self.config.model_copy(update={"tasks": [task]}).model_dump_json()
        return (attempt_name(attempt), config_json, task.id, attempt.attempt, self.runner, attempt.repeat)

    def adopt(self, view: TaskView) -> ActiveAttempt | Lost:
        task_dir = self.config.run_dir / "tasks" / view.key
        if view.placement is None:
            raise QueueRefused(f"{task_dir}: attempt {view.attempt} runs as a local process; run the queue with "
                               "the config that started it")
        placement = view.placement
        try:
            group = self.slots.adopt(placement.slot, view.key, placement.ray_node_id)
        except ValueError:
            return self._lost(placement, "its slot reservation is gone")
        remote = _Remote(group, placement, task_dir)
        if placement.ray_node_id is None:  # perhaps never started: start it (once) where Ray placed it
            task = next(task for task in self.config.tasks if task.id == view.task_id)
            remote.start_args = self._start_args(task, AttemptId(run_id=str(self.config.run_id), task_id=view.task_id,
                                                                 attempt=view.attempt, repeat=view.repeat))
        else:
            try:
                remote.agent = ray.get_actor(node_agent_name(str(self.config.run_id), placement.ray_node_id),
                                             namespace=self.settings.namespace)
            except ValueError:
                return self._lost(placement, "its node's agent is gone")
            remote.start_ref = remote.agent.placed.remote(placement.actor_name)
        self.remotes[view.key] = remote
        return ActiveAttempt(view.task_id, view.attempt, placement.runner_pid or 0, placement.launched_at, True,
                             task_dir, placement.node, view.repeat)

    def _agent(self, ray_node_id: str) -> Any:
        """The run's agent on that node (created there by the first call)."""
        if ray_node_id not in self.agents:
            slots = next((n["Resources"].get(self.settings.slot_resource, 0) for n in self._cluster_nodes()
                          if n["NodeID"] == ray_node_id), 0)
            self.agents[ray_node_id] = node_agent(self.config, ray_node_id, slots)
        return self.agents[ray_node_id]

    def _place(self, remote: _Remote) -> None:
        """Once Ray has placed the attempt's slot: ask that node's agent to start it (or, adopted, to report)."""
        entry = placement_group_table(remote.group)
        if entry.get("state") == "REMOVED":
            remote.ended = _Ended(None, "its slot reservation was removed")
        elif entry.get("state") == "CREATED":
            ray_node_id = entry["bundles_to_node_id"][0]
            self.slots.placed(remote.placement.slot, ray_node_id)
            remote.agent = self._agent(ray_node_id)
            remote.start_ref = self._start_call(remote)

    def _start_call(self, remote: _Remote) -> Any:
        if remote.start_args is None:
            return remote.agent.placed.remote(remote.placement.actor_name)
        return remote.agent.start.remote(*remote.start_args, self.key)

    def stopped(self, active: Iterable[ActiveAttempt]) -> list[str]:
        self.slots.tick()
        by_ref: dict[Any, tuple[ActiveAttempt, _Remote]] = {}
        done = []
        for attempt in active:
            remote = self.remotes[attempt.key]
            if remote.agent is None and remote.ended is None:
                self._place(remote)
            if remote.ended is not None:
                done.append(attempt.key)
                continue
            if remote.agent is None:
                continue
            if remote.start_ref is None and remote.status_ref is None:
                remote.status_ref = remote.agent.status.remote(remote.placement.actor_name, STATUS_WAIT_SEC)
            by_ref[remote.start_ref or remote.status_ref] = (attempt, remote)
        if by_ref:
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
            done += [by_ref[ref][0].key for ref in ready if self._answered(ref, *by_ref[ref])]
        return done

    def _answered(self, ref: Any, attempt: ActiveAttempt, remote: _Remote) -> bool:
        """Take one ready answer; True when the attempt has stopped (exited or died)."""
        try:
            answer = ray.get(ref, timeout=CALL_TIMEOUT_SEC)
        except ActorUnavailableError:  # unreachable for now; Ray decides later whether its node is dead
            if ref is remote.start_ref:
                remote.start_ref = self._start_call(remote)
            else:
                remote.status_ref = None
            return False
        except NodeGatewayError as exc:  # raised by start() on the node, no credential in it
            remote.ended = _Ended("gateway", str(exc.cause if hasattr(exc, "cause") else exc))
            return True
        except ConfigurationError as exc:  # start() on a node that cannot run the guest (kinds.check_host)
            remote.ended = _Ended("configuration", str(exc.cause if hasattr(exc, "cause") else exc))
            return True
        except AttemptGone:
            remote.ended = _Ended(None, "its node's agent does not run it (the agent was started again)")
            return True
        except RayActorError as exc:
            self.agents = {node: agent for node, agent in self.agents.items() if agent is not remote.agent}
            drained = _Ended("node_lost", f"node {remote.placement.node} was drained mid-attempt")
            remote.ended = drained if exc.preempted else _Ended(None, f"its node's agent died ({type(exc).__name__})")
            return True
        except RayError as exc:
            remote.ended = _Ended(None, f"its node's agent failed ({type(exc).__name__})")
            return True
        if ref is remote.start_ref:
            remote.start_ref = None
            self._placed(attempt, remote, NodeInfo.model_validate(answer["node"]), answer["pid"])
            return False
        remote.status_ref = None
        if answer["progress"] and answer["progress"] != remote.progress:
            remote.progress = answer["progress"]
            write_json(remote.task_dir / "progress.json", answer["progress"])
        remote.exit_code = answer["exit"]
        return answer["exit"] is not None

    def _placed(self, attempt: ActiveAttempt, remote: _Remote, node: NodeInfo, pid: int) -> None:
        self.known[node.name] = node
        attempt.node, attempt.pid = node.name, pid
        if remote.placement.node != node.name:
            remote.placement = remote.placement.model_copy(update={
                "node": node.name, "ray_node_id": node.ray_node_id, "runner_pid": pid})
            write_record(remote.task_dir / "placement.json", remote.placement)

    def settle(self, active: ActiveAttempt) -> Lost | None:
        remote = self.remotes.pop(active.key)
        name = remote.placement.actor_name
        if remote.ended is not None:
            self._end(remote)
            if remote.ended.classification is not None:
                return Lost(remote.ended.classification, remote.ended.reason)
            return self._lost(remote.placement, remote.ended.reason)
        try:
            payload = ray.get(remote.agent.collect.remote(name), timeout=CALL_TIMEOUT_SEC)
        except (RayActorError, GetTimeoutError, AttemptGone) as exc:
            self._end(remote)
            return self._lost(remote.placement, f"collecting its results failed ({type(exc).__name__})")
        attempt_id = AttemptId(run_id=str(self.config.run_id), task_id=active.task_id, attempt=active.attempt,
                               repeat=active.repeat)
        if self.config.token_log is not None:
            append_rows(self.config.token_log, payload["token_rows"], attempt_id.gateway_scope, self.merged)
        append_log(self.config.run_dir / "logs" / f"{active.key}.log", payload["log"])
        unpack_into(remote.task_dir, payload["files"], Path(payload["path"]) if payload["path"] else None)
        # waited for: a later sweep ends the node's runners and would otherwise forget the copy's place
        with contextlib.suppress(RayError, AttemptGone):  # the copy is only a copy: the results are home
            ray.get(remote.agent.discard.remote(name), timeout=CALL_TIMEOUT_SEC)
        self.slots.free(remote.placement.slot)
        return None

    def _lost(self, placement: Placement, why: str) -> Lost:
        if placement.ray_node_id is not None and not self._node_alive(placement.ray_node_id):
            return Lost("node_lost", f"node {placement.node} was lost mid-attempt; {why}")
        where = f"on node {placement.node}" if placement.node else "before it reached a node"
        return Lost("interrupted", f"the attempt ended without a result {where}; {why}")

    def _end(self, remote: _Remote) -> None:
        """Give the attempt up: its runner stops (if its agent is still there) and its slot is removed (its node
        may be gone)."""
        if remote.agent is not None:
            with contextlib.suppress(RayError):  # an agent that is gone took its runners with it
                remote.agent.end.remote(remote.placement.actor_name)
        self.slots.remove(remote.placement.slot)

    @staticmethod
    def _kill(actor: Any) -> None:
        with contextlib.suppress(RayError, ValueError):  # already gone
            ray.kill(actor)

    # Leftovers ------------------------------------------------------------------------------------------------

    def remove_leftovers(self, attempt: AttemptId, node: str | None) -> None:
        info = self.known.get(node) if node else None
        if info is None or info.ray_node_id is None or not self._node_alive(info.ray_node_id):
            return  # a lost node's containers went with it (docs/ray.md: clean a node before it rejoins)
        self._agent(info.ray_node_id).cleanup.remote(attempt.task_id, attempt.attempt, attempt.repeat)

    def _run_actors(self, prefix: str) -> list[str]:
        return [entry["name"] for entry in list_named_actors(all_namespaces=True)
                if entry["namespace"] == self.settings.namespace and entry["name"].startswith(prefix)]

    def sweep(self, live: set[AttemptId]) -> list[AttemptId]:
        run_id = str(self.config.run_id)
        keep = {attempt_name(attempt) for attempt in live}
        self.slots.remove_all_but({remote.placement.slot for remote in self.remotes.values()
                                   if remote.placement.actor_name in keep})  # held by no current attempt
        refs = [self._agent(node["NodeID"]).sweep.remote(sorted(keep)) for node in self._live_slot_nodes()]
        removed: set[AttemptId] = set()
        for ref in refs:
            try:
                removed.update(AttemptId(run_id=run_id, task_id=task_id, repeat=repeat, attempt=attempt)
                               for task_id, repeat, attempt in ray.get(ref, timeout=CALL_TIMEOUT_SEC))
            except RayError:
                continue  # a node that cannot answer now is swept at the next start
        return sorted(removed, key=str)

    def close(self, run_done: bool) -> None:
        self.slots.remove_free()  # the slots of running attempts stay for the next queue to adopt
        if run_done:  # the run's gateways stop with it
            for name in self._run_actors(f"node:{self.config.run_id}/"):
                try:
                    agent = ray.get_actor(name, namespace=self.settings.namespace)
                    ray.get(agent.stop.remote(), timeout=CALL_TIMEOUT_SEC)
                except (ValueError, RayError):
                    continue
                self._kill(agent)
            self.agents.clear()
            if self.shared_root is not None:
                remove_key(self.shared_root)
        if self.owns_connection:
            ray.shutdown()
