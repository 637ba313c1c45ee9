"""What the runner reads from the model gateway: its budget (/healthz) and one task's live state.

The gateway shows its details only to this host or to a request naming a scope (with per-task secrets on,
carrying that scope's secret); everybody else learns only that it is up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests
from pydantic import BaseModel, ConfigDict

from hcu.gateway.budget import TaskStateView
from hcu.osworld.errors import GatewayError

TIMEOUT_SEC = 5.0


class TokenLogHealth(BaseModel):
    """What `/healthz` says about the gateway's token log."""

    model_config = ConfigDict(extra="allow")

    writable: bool
    """False: rows are held in memory until the log can be written again."""
    pending_rows: int = 0
    dropped_rows: int = 0
    error: str | None = None
    """Why the log cannot be written."""
    restored_from_open_file: int = 0
    """Times the log was deleted or moved while the gateway ran and put back from the file it held open."""


class GatewayHealth(BaseModel):
    """The gateway's `/healthz` answer to this host or to a request naming a scope (meta.json keeps the one the
    guest read). Keys a newer gateway adds are kept as they are."""

    model_config = ConfigDict(extra="allow")

    status: str = "up"
    provider: str
    """The upstream API the gateway speaks (openai, anthropic, gemini, ...)."""
    max_requests_per_task: int
    """The budget of counted generations per scope."""
    rate_limit_max_wait: float | None = None
    upstreams: list[str] = []
    """The upstreams' labels, never their credentials."""
    tasks: int | None = None
    """Scopes the gateway has seen."""
    scope_secrets: bool = False
    """The gateway serves a scope only with its secret (started with --scope-key-file)."""
    scope_key_id: str | None = None
    """Which scope key it holds (never the key)."""
    token_log: TokenLogHealth | None = None
    task: TaskStateView | None = None
    """With `?task=`: that scope's state."""


def gateway_health(gateway_url: str, *, task: str | None = None, secret: str | None = None,
                   timeout_sec: float = TIMEOUT_SEC) -> GatewayHealth:
    """GET <gateway>/healthz (with `?task=` for one task's state, which needs the scope's `secret` when the
    gateway has per-task secrets on); GatewayError when it does not answer."""
    url = gateway_url.rstrip("/") + "/healthz"
    headers = {"Authorization": f"Bearer {secret}"} if secret else None
    try:
        resp = requests.get(url, params={"task": task} if task else None, headers=headers, timeout=timeout_sec)
        resp.raise_for_status()
        return GatewayHealth.model_validate(resp.json())
    except (requests.RequestException, ValueError) as exc:
        raise GatewayError(f"gateway {url} did not answer /healthz: {type(exc).__name__}") from None


def check_budget(health: Mapping[str, Any], max_model_calls: int, gateway_url: str) -> None:
    """The gateway enforces the budget this run was configured with; GatewayError naming the fix otherwise."""
    budget = health.get("max_requests_per_task")
    if budget != max_model_calls:
        raise GatewayError(f"the gateway at {gateway_url} enforces max_requests_per_task={budget}, this run "
                           f"max_model_calls={max_model_calls}: restart the gateway with --max-requests-per-task "
                           f"{max_model_calls}")
