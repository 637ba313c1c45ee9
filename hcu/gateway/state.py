"""What every request of one gateway process shares: its configuration, provider, pool, budget and log."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict

from hcu.gateway.budget import Budget
from hcu.gateway.pool import Pool
from hcu.gateway.provider import Provider
from hcu.gateway.request_body import MAX_BODY_BYTES
from hcu.gateway.restore import restore
from hcu.gateway.scope_secret import ScopeGuard, load_or_create_key
from hcu.gateway.tokenlog import TokenLog

log = logging.getLogger("hcu.gateway")


class GatewayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_requests_per_task: int
    """Successful generations allowed per task scope."""
    rate_limit_max_wait: float = 300.0
    """Most seconds of rate-limit waits per client request before the 429 goes to the client."""
    out: Path
    """Token log (JSONL); counters are restored from it at start."""
    connect_timeout_sec: float = 10.0
    idle_timeout_sec: float = 300.0
    """Longest silence from the upstream, waiting for headers or between stream chunks."""
    header_timeout_sec: float = 15.0
    """Longest a client connection may sit idle or take to send a complete request header."""
    max_connections_per_peer: int = 64
    """Open client connections allowed per peer address; more are closed at once."""
    max_body_bytes: int = MAX_BODY_BYTES
    scope_key_file: Path | None = None
    """With a key file, a task scope is served only to requests carrying its secret (hcu.gateway.scope_secret);
    without one, any placeholder credential is accepted."""


class GatewayState:
    """Everything the requests of one gateway process share."""

    def __init__(self, config: GatewayConfig, provider: Provider, pool: Pool) -> None:
        self.config = config
        self.provider = provider
        self.pool = pool
        self.budget = Budget(config.max_requests_per_task)
        self.scope_guard = ScopeGuard(load_or_create_key(config.scope_key_file)) if config.scope_key_file else None
        began = time.monotonic()
        restored = restore(config.out)
        self.budget.restore(restored.tasks)
        for task, (resource, deployment) in restored.placements.items():  # a task keeps its resource
            pool.restore(task, resource, deployment)
        if restored.rows:
            log.info("restored %d tasks from %d token log rows in %.2f s", len(restored.tasks), restored.rows,
                     time.monotonic() - began)
        self.token_log = TokenLog(config.out)
        self.session: aiohttp.ClientSession | None = None


STATE = web.AppKey("state", GatewayState)
