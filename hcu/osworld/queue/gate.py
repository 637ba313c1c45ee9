"""The queue's launch gate: no attempt starts while the gateway is down or cannot write its token log, and a
gateway that enforces another budget, or holds another scope key, than the config stops the queue before it
burns every task's attempts on `gateway` failures."""

from __future__ import annotations

from collections.abc import Callable

from hcu.osworld.attempt.gateway_health import gateway_health
from hcu.osworld.attempt.scope_credential import check_scope_key, gateway_credential
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
        try:
            check_scope_key(health.model_dump(), gateway_credential(config.scope_key_file, "gate"),
                            str(config.gateway))
        except GatewayError as exc:
            raise GatewayMismatch(str(exc)) from None
        token_log = health.model_dump().get("token_log") or {}
        if token_log.get("writable") is False:
            return f"launches held: the gateway cannot write its token log ({token_log.get('error')})"
        return None

    return gate
