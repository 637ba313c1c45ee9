"""Per-attempt secrets: a task scope is served only to the client that holds its secret.

The runner and the gateway share a key file on the host (guests never see it). An attempt's secret is an HMAC
of its scope under that key, so the gateway needs no list of secrets and a guest cannot derive another
scope's secret (`.a99`, another task). The runner puts the secret into the guest's placeholder credential,
which each CLI already sends (Bearer, `x-api-key`, `x-goog-api-key`). Without a key file the gateway accepts
any placeholder, as the reference describes.

Secrets and the key live only in these objects and the key file: their `repr` hides them, and nothing logs
them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

from hcu.gateway.errors import GatewayProxyError

KEY_BYTES = 32
SECRET_PREFIX = "hcu1-"
_KEY_ID_MESSAGE = b"hcu scope key id"
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
SECRET_SHAPE = re.compile(SECRET_PREFIX + "[0-9A-Fa-f]*")
"""Anything that looks like a scope secret (or the start of one), wherever a guest wrote it."""
SECRET_SHOWN_AS = "[scope secret]"


class ScopeKeyError(GatewayProxyError, ValueError):
    """The key file cannot be read, created or understood (the message never contains the key)."""


def load_or_create_key(path: Path) -> bytes:
    """The key in `path`; a new random one (mode 0600) when the file does not exist yet. Whichever of the
    gateway and the runner comes first creates it; the file appears complete or not at all."""
    if not path.exists():
        _create(path)
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ScopeKeyError(f"cannot read {path} ({exc.strerror})") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < KEY_BYTES:
        raise ScopeKeyError(f"{path} does not hold a key (expected {2 * KEY_BYTES} hex characters)")
    return key


def _create(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (secrets.token_hex(KEY_BYTES) + "\n").encode())
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # atomic, and refuses to replace a key someone else created meanwhile
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    except OSError as exc:
        raise ScopeKeyError(f"cannot create {path} ({exc.strerror})") from None


def redact_secrets(text: str) -> str:
    """`text` with everything shaped like a scope secret replaced (a no-op scan when there is none)."""
    return SECRET_SHAPE.sub(SECRET_SHOWN_AS, text) if SECRET_PREFIX in text else text


def scope_secret(key: bytes, scope: str) -> str:
    """The secret of one task scope."""
    return SECRET_PREFIX + hmac.new(key, scope.encode(), hashlib.sha256).hexdigest()


def key_id(key: bytes) -> str:
    """A public name for the key, so runner and gateway can tell whether they share it (reveals nothing
    about any scope's secret)."""
    return hmac.new(key, _KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def presented_credentials(headers: Mapping[str, str], query: Mapping[str, str]) -> Iterable[str]:
    """What a client sent as its credential, wherever its SDK puts it."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name)
        if value:
            yield value[7:].strip() if name == "authorization" and value[:7].lower() == "bearer " else value
    if query.get("key"):
        yield query["key"]


class ScopeGuard:
    """Decides whether a request may use a task scope."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self.key_id = key_id(key)

    def allows(self, scope: str, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        expected = scope_secret(self._key, scope).encode()
        return any(hmac.compare_digest(expected, c.encode()) for c in presented_credentials(headers, query))

    def __repr__(self) -> str:
        return f"ScopeGuard(key_id={self.key_id})"
