"""The queue's launch gate: no attempt starts while the gateway is down, and a gateway that enforces another
budget than the config stops the queue before it burns every task's attempts on `gateway` failures."""

from __future__ import annotations

from collections.abc import Callable

from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.errors import GatewayError
from hcu.osworld.queue.config import RunConfig

LaunchGate = Callable[[], str | None]
"""Returns why launches are held now (None = launch); raises GatewayMismatch when no attempt can succeed."""


class GatewayMismatch(Exception):
    """The gateway enforces another budget than the config: every attempt would fail its preflight."""


def gateway_gate(config: RunConfig) -> LaunchGate:
    def gate() -> str | None:
        try:
            health = gateway_health(str(config.gateway))
        except GatewayError as exc:
            return f"launches held: {exc}"
        if health.max_requests_per_task != config.max_model_calls:
            raise GatewayMismatch(
                f"gateway {config.gateway} enforces max_requests_per_task={health.max_requests_per_task}, the "
                f"config says max_model_calls={config.max_model_calls}: restart the gateway with "
                f"--max-requests-per-task {config.max_model_calls}")
        return None

    return gate
