"""No credential and no scope secret in what the gateway, or aiohttp under it, logs.

aiohttp logs a request it cannot parse with the offending header line in the exception text ("Invalid
header value char: b'Authorization: Bearer hcu1-...'", "Got more than 8190 bytes when reading: b'Bearer
...'"), and a guest chooses those bytes. A filter on the loggers involved formats each record (message and
traceback) and replaces, before any handler sees it: the upstream credentials in use, anything shaped like a
scope secret, long hex runs (a secret cut short), and the value after a credential header's name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable

from hcu.gateway.credentials import REDACTED
from hcu.gateway.scope_secret import SECRET_SHAPE

LOGGERS = ("aiohttp.server", "aiohttp.web", "aiohttp.internal", "aiohttp.access", "aiohttp.client", "asyncio",
           "hcu.gateway")
_SHOWN = REDACTED.decode()
_PATTERNS = (
    SECRET_SHAPE,
    re.compile(r"[0-9A-Fa-f]{40,}"),
    re.compile(r"(?i)(?<=authorization)[^\\\n'\"]*|(?<=api-key)[^\\\n'\"]*|(?<=bearer )[^\\\n'\"]*"),
)

SecretSource = Callable[[], Iterable[bytes]]


class Redactor(logging.Filter):
    """Rewrites records in place; never drops one."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[SecretSource] = []
        self._formatter = logging.Formatter()

    def redact(self, text: str) -> str:
        for source in self.sources:
            for secret in source():
                text = text.replace(secret.decode(errors="replace"), _SHOWN)
        for pattern in _PATTERNS:
            text = pattern.sub(_SHOWN, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.redact(record.getMessage()), None
        if record.exc_info:
            record.exc_text = self._formatter.formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


REDACTOR = Redactor()


def redact_logs(secrets: SecretSource) -> None:
    """Filter every gateway and aiohttp log record through REDACTOR, which also hides what `secrets` returns."""
    REDACTOR.sources.append(secrets)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if REDACTOR not in logger.filters:
            logger.addFilter(REDACTOR)
