"""Which headers cross the gateway, each way.

Upstream: the client's headers minus its credentials, hop-by-hop headers (and every header its `Connection`
names), the operator's billing scope, addresses, cookies, and every header a proxy or framework in front of
the upstream could take as another method or path (`X-HTTP-Method-Override`, `X-Original-URL`,
`X-Rewrite-URL`): the allow-list of methods and paths holds whatever sits behind the upstream's address.
The body goes as `application/json`, the only thing the gateway forwards, uncompressed (`Accept-Encoding:
identity`: the gateway reads what comes back).

Downstream: the upstream's headers minus hop-by-hop ones and cookies, and minus `Content-Encoding` once aiohttp
has decoded the body. An encoding aiohttp does not decode (`x-gzip`, `br`, two stacked) is refused before any
byte reaches the client, so the scrubber always reads plain text.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from multidict import CIMultiDictProxy

from hcu.gateway.credentials import CLIENT_CREDENTIAL_HEADERS, REDACTED

HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
     "transfer-encoding", "upgrade", "http2-settings", "host", "content-length", "expect"}
)
PRIVATE_REQUEST_HEADERS = frozenset(
    {"cookie", "openai-organization", "openai-project", "x-goog-user-project", "forwarded", "x-real-ip", "via",
     "x-hcu-resource", "accept-encoding", "content-encoding", "content-type", "max-forwards", "x-goog-fieldmask"}
)
"""Not the provider API's business: the operator's billing scope (organization, project), the client's cookies
and addresses; a field mask (it would hide the usage and the finish the gateway counts by). The gateway sets
its own encoding and content type."""
REROUTING_PREFIXES = ("x-forwarded-", "x-original-", "x-envoy-", "x-http-method", "x-method-")
REROUTING_WORDS = ("override", "rewrite")
"""Names proxies and frameworks take as another method, path or host."""
DROP_REQUEST_HEADERS = HOP_HEADERS | CLIENT_CREDENTIAL_HEADERS | PRIVATE_REQUEST_HEADERS
DROP_RESPONSE_HEADERS = HOP_HEADERS | {"content-encoding", "set-cookie"}
DECODED_ENCODINGS = frozenset({"gzip", "deflate"})
"""What aiohttp decodes here (br and zstd need packages this gateway does not install, and are never asked
for)."""


def connection_named(headers: CIMultiDictProxy[str]) -> set[str]:
    """Headers the sender's `Connection` lists as hop-by-hop."""
    return {t.strip().lower() for value in headers.getall("Connection", []) for t in value.split(",")}


def upstream_headers(client: CIMultiDictProxy[str], has_body: bool) -> dict[str, str]:
    """The client's headers as they go upstream (the credential is added by the caller)."""
    named = connection_named(client)
    kept = {name: value for name, value in client.items() if not _dropped(name) and name.lower() not in named}
    kept["Accept-Encoding"] = "identity"
    if has_body:
        kept["Content-Type"] = "application/json"
    return kept


@lru_cache(maxsize=1024)  # every CLI sends the same few dozen names
def _dropped(name: str) -> bool:
    low = name.lower()
    return (low in DROP_REQUEST_HEADERS or low.startswith(REROUTING_PREFIXES)
            or any(word in low for word in REROUTING_WORDS))


def undecoded_encoding(upstream: CIMultiDictProxy[str]) -> str | None:
    """The upstream's Content-Encoding when aiohttp left the body encoded; None when the body is plain."""
    values = [v.strip().lower() for v in upstream.getall("Content-Encoding", [])]
    if not values or values in (["identity"], *([e] for e in DECODED_ENCODINGS)):
        return None
    return ", ".join(values)


def client_headers(upstream: CIMultiDictProxy[str], secrets: tuple[bytes, ...],
                   drop: frozenset[str] = DROP_RESPONSE_HEADERS) -> dict[str, str]:
    """The upstream's headers as they go to the client, any echo of the credential replaced."""
    named = connection_named(upstream)
    kept = {k: v for k, v in upstream.items() if k.lower() not in drop and k.lower() not in named}
    return redact_values(kept, secrets)


def redact_values(headers: Mapping[str, str], secrets: tuple[bytes, ...]) -> dict[str, str]:
    kept = dict(headers)
    values = "\n".join(kept.values())
    for secret in secrets:
        if secret.decode() in values:  # rare: only then look at each header
            kept = {k: REDACTED.decode() if secret.decode() in v else v for k, v in kept.items()}
    return kept
