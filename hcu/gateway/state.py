"""What every request of one gateway process shares: its configuration, provider, pool, budget, log and ledger."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import web

from hcu.gateway.budget import Budget
from hcu.gateway.clock import SYSTEM_CLOCK, Clock
from hcu.gateway.ledger import Ledger
from hcu.gateway.options import GatewayConfig
from hcu.gateway.pool import Pool
from hcu.gateway.provider import Provider
from hcu.gateway.request_body import BodyLimits, PeerBodies
from hcu.gateway.restore import restore
from hcu.gateway.scope_secret import ScopeGuard, load_or_create_key
from hcu.gateway.tokenlog import TokenLog

log = logging.getLogger("hcu.gateway")


class GatewayState:
    """Everything the requests of one gateway process share."""

    def __init__(self, config: GatewayConfig, provider: Provider, pool: Pool, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.provider = provider
        self.pool = pool
        self.clock = pool.clock = clock
        self.budget = Budget(config.max_requests_per_task, clock)
        self.scope_guard = ScopeGuard(load_or_create_key(config.scope_key_file)) if config.scope_key_file else None
        self.body_limits = BodyLimits(config.max_body_bytes, config.body_idle_timeout_sec, config.body_timeout_sec)
        self.bodies = PeerBodies(config.body_bytes_per_peer)
        self.exchanges: set[asyncio.Task] = set()
        """The handlers of requests being served (a shutdown ends those still reading a left client's answer,
        each writing its row)."""
        began = clock.monotonic()
        restored = restore(config.out)
        self.budget.restore(restored.tasks)
        for task, (resource, deployment) in restored.placements.items():  # a task keeps its resource
            pool.restore(task, resource, deployment)
        if restored.rows:
            log.info("restored %d tasks from %d token log rows in %.2f s", len(restored.tasks), restored.rows,
                     clock.monotonic() - began)
        self.token_log = TokenLog(config.out, config.max_log_field_chars)
        self.ledger = Ledger(config, self.token_log, self.budget, provider.name, clock)
        """Where every request is written down (charged rows, refusals, the log's ceilings)."""
        self.ledger.restore(restored)
        self.session: aiohttp.ClientSession | None = None


STATE = web.AppKey("state", GatewayState)
