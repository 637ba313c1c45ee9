"""The head's view of the run's node gateways, for the admission under "max_active_tasks": "auto"
(queue/admission.py): each node's agent reads its own gateway's `/healthz?waits=<run id>.` on its host (the
gateway shows its details only to its host, and the head may not reach a node's bridge at all), and the head keeps
each node's latest answer. One call in flight per node, never waited for: a poll takes the answers that are in.
A node whose answer has not come keeps its last one, so a scope's cumulative waits never seem to go back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ray
from pydantic import ValidationError
from ray.exceptions import RayError

from hcu.osworld.quota.gateway_reading import GatewayReport


class NodeReports:
    def __init__(self) -> None:
        self.calls: dict[str, Any] = {}
        """Ray node id -> its agent's call in flight."""
        self.latest: dict[str, GatewayReport] = {}

    def collect(self, agents: Mapping[str, Any]) -> list[GatewayReport] | None:
        """The latest report of every node among `agents` (Ray node id -> the run's agent there) that has given
        one (None: none has yet); asks each again whose last answer is in."""
        if self.calls:
            ready, _ = ray.wait(list(self.calls.values()), num_returns=len(self.calls), timeout=0)
            for node, call in list(self.calls.items()):
                if call in ready:
                    del self.calls[node]
                    self._take(node, call)
        self.latest = {node: report for node, report in self.latest.items() if node in agents}
        for node, agent in agents.items():
            if node not in self.calls:
                self.calls[node] = agent.gateway_report.remote()
        return list(self.latest.values()) or None

    def _take(self, node: str, call: Any) -> None:
        try:
            answer = ray.get(call, timeout=0)
        except RayError:  # the agent is gone or failed: its last report stands until the node is given up
            return
        if answer is not None:
            try:
                self.latest[node] = GatewayReport.model_validate(answer)
            except ValidationError:
                return
