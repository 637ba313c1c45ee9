"""The queue's launch gate: no attempt starts while the gateway is down or cannot write its token log, and a
gateway that enforces another budget, or holds another scope key, than the config stops the queue before it
burns every task's attempts on `gateway` failures."""

from __future__ import annotations

from collections.abc import Callable

from hcu.osworld.attempt.gateway_health import check_budget, gateway_health
from hcu.osworld.attempt.scope_credential import check_scope_key, gateway_credential
from hcu.osworld.errors import GatewayError, HcuOSWorldError
from hcu.osworld.run_config import RunConfig

LaunchGate = Callable[[], str | None]
"""Returns why launches are held now (None = launch); raises GatewayMismatch when no attempt can succeed."""


class GatewayMismatch(HcuOSWorldError):
    """The gateway enforces another budget than the config: every attempt would fail its preflight."""


def launch_gate(config: RunConfig) -> LaunchGate | None:
    """The gate a run needs: the local executor's one gateway is checked here, on the head. With the ray
    executor there is none: guests reach their gateway (the node's own, or `gateway`) from their node, which
    the head may not, and each runner's probe checks that gateway's budget and scope key against the run's key
    it was shipped, before any model call."""
    return gateway_gate(config) if config.executor == "local" else None


def gateway_gate(config: RunConfig) -> LaunchGate:
    def gate() -> str | None:
        try:
            health = gateway_health(str(config.gateway))
        except GatewayError as exc:
            return f"launches held: {exc}"
        try:  # the gate runs on the gateway's host, which /healthz shows its details without a scope
            check_budget(health.model_dump(), config.max_model_calls, str(config.gateway))
            check_scope_key(health.model_dump(), gateway_credential(config.scope_key_file, "gate"),
                            str(config.gateway))
        except GatewayError as exc:
            raise GatewayMismatch(str(exc)) from None
        token_log = health.model_dump().get("token_log") or {}
        if token_log.get("writable") is False:
            return f"launches held: the gateway cannot write its token log ({token_log.get('error')})"
        return None

    return gate
