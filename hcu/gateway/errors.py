"""The one root of the gateway's exceptions, so a caller can catch "anything the gateway raised on purpose" in
one clause and tell it from a bug.

Every public exception class under `hcu.gateway` derives from `GatewayProxyError` (a test walks the package to
keep it so). The classes stay next to the code that raises them; the two that describe bad input are also
`ValueError`s, so `except ValueError` callers keep working."""

from __future__ import annotations


class GatewayProxyError(Exception):
    """Root of every exception `hcu.gateway` raises on purpose. The tree:

        GatewayProxyError
        ├── CredentialError       hcu.gateway.credentials: the upstream credential could not be obtained
        ├── EventTooLarge         hcu.gateway.sse: an upstream event longer than the parser's limit
        ├── Refused               hcu.gateway.refusal: a client request refused before it goes upstream
        ├── ScopeKeyError         hcu.gateway.scope_secret: the per-task key file is unusable (also ValueError)
        └── UpstreamSpecError     hcu.gateway.pool: a malformed `--upstreams` entry (also ValueError)

    Messages never contain a credential, a scope secret or the scope key."""
