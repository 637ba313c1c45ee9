"""The request/response protocol between hcu and its OSWorld process (standard library only: both sides import it).

One JSON object per line. hcu writes requests to the child's stdin, the child answers each on its stdout, in
order; everything else the child or OSWorld prints goes to its stderr.

    request   {"protocol": 1, "id": 7, "op": "setup_step", "args": {...}}
    response  {"protocol": 1, "id": 7, "ok": true, "result": ...}
              {"protocol": 1, "id": 7, "ok": false, "error": {"kind": "missing_function", "message": "..."}}

The first request of every child is `hello`; a child that answers with another protocol version is refused.
Bump `PROTOCOL_VERSION` whenever an op's arguments or result change shape.
"""

from __future__ import annotations

import json
from typing import Any

from hcu.osworld.errors import HcuOSWorldError

PROTOCOL_VERSION = 3

OPS = ("hello", "open", "setup_step", "evaluate", "check_names", "describe_v2", "v2_setup", "v2_evaluate")
"""hello: who the child is (and which hcu checkout it runs). open: the guest and cache the following ops use.
setup_step: one SetupController step, answered with the step's exchanges with the guest (a guest answer that is
not a success fails it). evaluate: postconfig-free scoring through `DesktopEnv.evaluate`, naming the getters
that read nothing. check_names: load metric/getter names.
describe_v2 / v2_setup / v2_evaluate: a V2 task class."""

ERROR_KINDS = (
    "missing_function",  # a metric or getter the task names is not in this desktop_env
    "missing_module",  # OSWorld's code needs a module this interpreter lacks
    "step_failed",  # a setup or postconfig step raised, or the guest did not answer
    "needs",  # a V2 task needs something this run does not provide (websites, judge, ...)
    "task",  # a V2 task file could not be loaded
    "exception",  # anything else OSWorld's code raised
    "protocol",  # a malformed request
)


class ProtocolError(HcuOSWorldError):
    """A line that is not a message of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode()


def request(request_id: int, op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"protocol": PROTOCOL_VERSION, "id": request_id, "op": op, "args": args}


def success(request_id: int, result: Any) -> dict[str, Any]:
    return {"protocol": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": result}


def failure(request_id: int, kind: str, message: str) -> dict[str, Any]:
    return {"protocol": PROTOCOL_VERSION, "id": request_id, "ok": False,
            "error": {"kind": kind, "message": one_line(message)}}


def decode(line: bytes | str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not a JSON line: {str(line)[:200]!r}") from None
    if not isinstance(message, dict) or message.get("protocol") != PROTOCOL_VERSION:
        got = message.get("protocol") if isinstance(message, dict) else None
        raise ProtocolError(f"expected protocol {PROTOCOL_VERSION}, got {got!r}") from None
    return message


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def mask(text: str, secret: str) -> str:
    """`text` with `secret` masked (a no-op for an empty secret)."""
    return text.replace(secret, "***") if secret else text
