"""The upstream pool: which resource and deployment serves each task.

A resource is one upstream host; a deployment is one model deployment on it (`host@deployment`). A task never
changes resource (agents replay encrypted reasoning only the producing resource can read). Within its
resource, a request that does not continue server-side state (`previous_response_id`) may move to a deployment
outside its cooldown, and the task then stays there.

A new task starts on the resource, then the deployment, with the fewest active tasks (a request within
`GATEWAY.placement_active_sec`), then on the one with the most remaining tokens last seen: since a task is bound
to its resource for life, the tasks a resource already carries say more of its next minutes than the remaining
tokens of its last answer (an attempt's demand grows over its steps, and a resource whose tasks are between calls
looks idle). With pinned resources (a relay in front), tasks get a resource name round-robin instead.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from hcu.defaults import GATEWAY
from hcu.gateway.clock import SYSTEM_CLOCK, Clock
from hcu.gateway.errors import GatewayProxyError
from hcu.gateway.observed_limits import ObservedLimits, read_limits

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$")
_DEPLOYMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
UNKNOWN_REMAINING = 1 << 60
"""Remaining tokens assumed for an upstream not heard from yet: try it before ones known to be drained."""


class UpstreamSpecError(GatewayProxyError, ValueError):
    """A malformed `--upstreams` entry."""


@dataclass
class Upstream:
    resource: str
    """host[:port], no scheme."""
    deployment: str | None = None
    remaining_tokens: int = UNKNOWN_REMAINING
    cooldown_until: float = 0.0
    observed: ObservedLimits | None = None
    """The rate-limit headers of its newest answer that had any (`/healthz` `upstream_limits`)."""

    @property
    def label(self) -> str:
        return f"{self.resource}@{self.deployment}" if self.deployment else self.resource

    def cooling(self, now: float) -> bool:
        return now < self.cooldown_until


def parse_upstreams(spec: str) -> list[Upstream]:
    """`host[:port][@deployment],...` -> upstreams; raises UpstreamSpecError naming the bad entry."""
    upstreams: list[Upstream] = []
    for entry in spec.split(","):
        host, _, deployment = entry.strip().partition("@")
        host_ok = bool(_HOST.match(host)) and (":" not in host or 0 < int(host.rpartition(":")[2]) < 65536)
        if not host_ok or ("@" in entry and not _DEPLOYMENT.match(deployment)):
            raise UpstreamSpecError(
                f"--upstreams: bad entry {entry.strip()!r}, expected host[:port] or host[:port]@deployment"
            )
        upstreams.append(Upstream(resource=host, deployment=deployment or None))
    if len({u.label for u in upstreams}) != len(upstreams):
        raise UpstreamSpecError("--upstreams: an entry is listed twice")
    return upstreams


@dataclass(slots=True)
class Placement:
    """Where a task's requests go."""

    upstream: Upstream
    pinned_resource: str | None = None
    last_request: float = -math.inf
    """When the task last asked for it (monotonic; never, for one restored from the token log)."""

    @property
    def resource(self) -> str:
        """The resource the task is bound to: the pinned one behind a relay, else the upstream host."""
        return self.pinned_resource or self.upstream.resource


@dataclass
class Pool:
    upstreams: list[Upstream]
    pin_resources: list[str] = field(default_factory=list)
    placements: dict[str, Placement] = field(default_factory=dict)
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        self._pins = itertools.cycle(self.pin_resources) if self.pin_resources else None

    def place(self, task: str, continues_state: bool) -> Placement:
        """The placement for the next request of `task` (assigning one on its first request)."""
        placement = self.placements.get(task)
        now = self.clock.monotonic()
        if placement is None:
            pin = next(self._pins) if self._pins else None
            placement = self.placements[task] = Placement(self._best(self.upstreams, now), pin)
        elif placement.upstream.cooling(now) and not continues_state:
            self.move(task, placement)
        placement.last_request = now
        return placement

    def restore(self, task: str, resource: str, deployment: str | None) -> None:
        """Re-bind a task to the resource (and deployment) an earlier run of the gateway gave it."""
        if self.pin_resources:
            if resource in self.pin_resources:
                self.placements[task] = Placement(self.upstreams[0], resource)
            return
        same = [u for u in self.upstreams if u.resource == resource]
        if same:
            self.placements[task] = Placement(next((u for u in same if u.deployment == deployment), same[0]))

    def move(self, task: str, placement: Placement) -> bool:
        """Move a task to another deployment of its resource outside cooldown; False if there is none."""
        now = self.clock.monotonic()
        current = placement.upstream
        siblings = [
            u for u in self.upstreams if u.resource == current.resource and u is not current and not u.cooling(now)
        ]
        if not siblings:
            return False
        placement.upstream = self._best(siblings, now)
        return True

    def _best(self, candidates: list[Upstream], now: float) -> Upstream:
        """Outside cooldown first, then the fewest active tasks on the resource and on the upstream, then the most
        remaining tokens last seen."""
        on_upstream: Counter[str] = Counter()
        on_resource: Counter[str] = Counter()
        for placement in self.placements.values():
            if now - placement.last_request < GATEWAY.placement_active_sec:
                on_upstream[placement.upstream.label] += 1
                on_resource[placement.upstream.resource] += 1
        return max(candidates, key=lambda u: (not u.cooling(now), -on_resource[u.resource], -on_upstream[u.label],
                                              u.remaining_tokens))

    def cool_down(self, upstream: Upstream, seconds: float) -> None:
        """Put a deployment in cooldown; a later, longer hint extends it, a shorter one never shortens it."""
        upstream.cooldown_until = max(upstream.cooldown_until, self.clock.monotonic() + seconds)

    @staticmethod
    def saw_remaining(upstream: Upstream, value: str | None) -> None:
        if value is not None and value.isdigit():
            upstream.remaining_tokens = int(value)

    @staticmethod
    def saw_limits(upstream: Upstream, provider: str, headers: Mapping[str, str], now: float) -> None:
        """Keep what an answer's headers say of the upstream's rate limits (an answer without any keeps the
        last figures)."""
        upstream.observed = read_limits(provider, headers, now) or upstream.observed
