"""The real upstream credential, added by the gateway after every client credential was dropped.

Credential values live only inside these objects: their `repr` hides them, and nothing else in the gateway
stores or prints them.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from hcu.gateway.clock import SYSTEM_CLOCK, Clock
from hcu.gateway.errors import GatewayProxyError

AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
MIN_SCRUBBED_LEN = 8
"""Shorter credentials (a relay's `unused`) are not scrubbed: replacing such a common string would mangle
answers without protecting anything."""
REFRESH_MARGIN_SEC = 300.0
"""Refresh an Entra token this long before it expires, so no request leaves with a token about to lapse."""


class CredentialError(GatewayProxyError):
    """The upstream credential could not be obtained (its message never contains a credential)."""


class TokenCredential(Protocol):
    """azure-identity's synchronous credential protocol (DefaultAzureCredential and friends)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        """Returns an AccessToken(token, expires_on)."""


class Credential(Protocol):
    async def headers(self) -> dict[str, str]:
        """Headers that authenticate one upstream request."""

    def secret_values(self) -> tuple[bytes, ...]:
        """The secret parts of those headers, to scrub from anything an upstream echoes back."""


class StaticCredential:
    """A fixed key sent in one header (`Authorization: Bearer`, `x-api-key`, `api-key`, `x-goog-api-key`)."""

    def __init__(self, header: str, value: str) -> None:
        self._header = header
        self._value = value
        secret = value.removeprefix("Bearer ").strip()
        self._secrets = (secret.encode(),) if len(secret) >= MIN_SCRUBBED_LEN else ()

    async def headers(self) -> dict[str, str]:
        return {self._header: self._value}

    def secret_values(self) -> tuple[bytes, ...]:
        return self._secrets

    def __repr__(self) -> str:
        return f"StaticCredential({self._header}=***)"


class AzureTokenCredential:
    """An Entra ID bearer token for Azure OpenAI, cached and refreshed `REFRESH_MARGIN_SEC` before expiry.

    `get_token` of azure-identity blocks (it may run `az` or call IMDS), so it runs in a worker thread, and
    one lock makes concurrent requests share a single refresh."""

    def __init__(self, credential: TokenCredential | None = None, scope: str = AZURE_SCOPE,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        self._credential = credential
        self._scope = scope
        self._clock = clock
        self._token: str | None = None
        self._expires_on = 0.0
        self._lock = asyncio.Lock()

    async def headers(self) -> dict[str, str]:
        if self._stale():
            async with self._lock:
                if self._stale():
                    await self._refresh()
        return {"Authorization": f"Bearer {self._token}"}

    def secret_values(self) -> tuple[bytes, ...]:
        return (self._token.encode(),) if self._token else ()

    def _stale(self) -> bool:
        return self._token is None or self._clock.time() > self._expires_on - REFRESH_MARGIN_SEC

    async def _refresh(self) -> None:
        try:
            access = await asyncio.to_thread(self._credential.get_token, self._scope)
        except Exception as exc:  # azure-identity raises many types; a request must fail cleanly, not crash
            raise CredentialError(f"Azure credential unavailable ({type(exc).__name__})") from None
        self._token, self._expires_on = access.token, float(access.expires_on)

    def __repr__(self) -> str:
        return "AzureTokenCredential(***)"


CLIENT_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})
REDACTED = b"[redacted by hcu gateway]"


def scrub(data: bytes | bytearray, secrets: tuple[bytes, ...]) -> bytes | bytearray:
    """`data` with every occurrence of a secret replaced (a no-op scan when none occurs)."""
    for secret in secrets:
        if secret in data:
            data = data.replace(secret, REDACTED)
    return data
