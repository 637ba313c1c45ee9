"""A client request the gateway refuses before anything goes upstream."""

from __future__ import annotations

from hcu.gateway.errors import GatewayProxyError


class Refused(GatewayProxyError):
    """`status` and `code` go into the provider-shaped error; `close` ends the connection after the answer
    (a body the gateway will not read must not be read, or lingered over, either)."""

    def __init__(self, status: int, code: str, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status, self.code, self.close = status, code, close
