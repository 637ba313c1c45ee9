"""The credential an attempt's agent sends to the gateway: the placeholder, or, with per-task secrets on
(`scope_key_file`), the attempt's scope secret. The runner issues it here, checks before any model call that
the gateway holds the same key, reads the scope's live state with it, and keeps it out of every result file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hcu.gateway.scope_secret import SECRET_SHOWN_AS, ScopeKeyError, key_id, load_or_create_key, scope_secret
from hcu.osworld.agents.base import PLACEHOLDER_TOKEN
from hcu.osworld.errors import GatewayError


@dataclass(frozen=True)
class GatewayCredential:
    token: str = field(repr=False)
    """What the agent sends as its API key."""
    secret: str | None = field(default=None, repr=False)
    """The scope secret (None with per-task secrets off)."""
    key_id: str | None = None

    def redact(self, data: bytes) -> bytes:
        """`data` without the secret (an agent may print its environment into its output)."""
        if self.secret is None:
            return data
        return data.replace(self.secret.encode(), SECRET_SHOWN_AS.encode())


def gateway_credential(key_file: Path | None, scope: str) -> GatewayCredential:
    if key_file is None:
        return GatewayCredential(PLACEHOLDER_TOKEN)
    try:
        key = load_or_create_key(key_file)
    except ScopeKeyError as exc:
        raise GatewayError(f"scope_key_file: {exc}") from None
    secret = scope_secret(key, scope)
    return GatewayCredential(secret, secret, key_id(key))


def check_scope_key(health: dict, credential: GatewayCredential, gateway_url: str) -> str | None:
    """The gateway will accept this attempt's credential (no model call is made to find out otherwise).
    Returns a warning when the gateway accepts any placeholder although we hold a key."""
    if health.get("scope_secrets") and credential.key_id is None:
        raise GatewayError(f"the gateway at {gateway_url} serves a scope only with its secret: run with "
                           "--scope-key-file set to the gateway's key file")
    if health.get("scope_secrets") and health.get("scope_key_id") != credential.key_id:
        raise GatewayError(f"the gateway at {gateway_url} uses another scope key (key id "
                           f"{health.get('scope_key_id')}, ours {credential.key_id}): give both the same key file")
    if credential.key_id is not None and not health.get("scope_secrets"):
        return (f"the gateway at {gateway_url} accepts any placeholder (started without --scope-key-file): "
                "this attempt's scope is not protected")
    return None
