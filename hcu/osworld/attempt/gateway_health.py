"""What the runner reads from the model gateway: its budget (/healthz) and one task's live state."""

from __future__ import annotations

import requests
from pydantic import BaseModel, ConfigDict

from hcu.gateway.budget import TaskStateView
from hcu.osworld.errors import GatewayError

TIMEOUT_SEC = 5.0


class GatewayHealth(BaseModel):
    model_config = ConfigDict(extra="allow")

    provider: str
    max_requests_per_task: int
    rate_limit_max_wait: float | None = None
    task: TaskStateView | None = None


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
