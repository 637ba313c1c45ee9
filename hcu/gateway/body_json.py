"""The JSON of a request body, read so that no upstream can read it differently.

The gateway decides on a few fields (`model`, `background`, `n`, `generationConfig.candidateCount`...), then
forwards the body. Parsers disagree on some inputs, and each disagreement would let the gateway check one
request while the upstream runs another; every such body is refused (400):

- a key twice in one object (the gateway would read the last, an upstream may keep the first);
- two keys one upstream reads as the same field: `Background` / `background` (Go's decoder matches fields
  case-insensitively, Unicode case folding included) or `candidate_count` / `candidateCount` (protobuf's JSON
  accepts both spellings). Field lookups here match the same way (`field`), so `Background: true` alone is
  seen for what it is;
- anything beyond strict JSON in UTF-8: a byte-order mark, invalid UTF-8, `NaN`/`Infinity`, numbers that
  overflow a double, unpaired surrogate escapes, trailing data, nesting past the parser's depth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TypeVar

import orjson

from hcu.gateway.errors import GatewayProxyError
from hcu.gateway.refusal import Refused

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
LARGE_BODY_BYTES = 1024 * 1024
T = TypeVar("T")


class _Ambiguous(GatewayProxyError, ValueError):
    """Two keys of one object that some upstream reads as one field."""


@lru_cache(maxsize=4096)  # the same few dozen keys come in every request
def field_key(name: str) -> str:
    """How the most lenient upstream matches a key to a field: case-folded, snake and camel case alike."""
    return name.casefold().replace("_", "")


class JsonObject(dict):
    """A parsed object that knows which key spells which field (`field` looks fields up in one step)."""

    __slots__ = ("by_field",)

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        super().__init__(pairs)
        self.by_field = {field_key(k): k for k in self}


def _object(pairs: list[tuple[str, object]]) -> JsonObject:
    obj = JsonObject(pairs)
    if len(obj) != len(pairs):
        keys: set[str] = set()
        twice = next(k for k, _ in pairs if k in keys or keys.add(k))  # type: ignore[func-returns-value]
        raise _Ambiguous(f"key {_shown(twice)} appears twice")
    if len(obj.by_field) != len(obj):
        seen: dict[str, str] = {}
        for key in obj:
            if (other := seen.setdefault(field_key(key), key)) != key:
                raise _Ambiguous(f"keys {_shown(other)} and {_shown(key)} name the same field for some upstreams")
    return obj


def _shown(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:60] + "...")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Ambiguous(f"number {text[:40]} overflows a double")
    return value


def _no_constant(name: str) -> object:
    raise _Ambiguous(f"{name} is not JSON")


def parse_json(data: bytes | bytearray) -> object:
    """The body's JSON (None for an empty body); Refused (400) for one that is not unambiguous JSON."""
    if not data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "invalid_request_error", "request body is not UTF-8") from None
    return _parse_text(text)


def inspect_json(body: bytearray, inspect: Callable[[object], T]) -> tuple[bytes | bytearray, T]:
    """`inspect(parsed body)` and the body to forward. A large ASCII body (a screenshot-heavy request) is held
    once while it is parsed: its bytes are given up for the text the parser needs (`body` is emptied) and
    encoded again once the parsed tree is gone, so it never exists three times over."""
    if len(body) < LARGE_BODY_BYTES or not body.isascii():
        return body, inspect(parse_json(body))
    text = body.decode("ascii")
    body.clear()
    result = inspect(_parse_text(text))
    return text.encode("ascii"), result


def _parse_text(text: str) -> object:
    try:
        if _SURROGATE_ESCAPE.search(text):
            orjson.loads(text)  # refuses unpaired surrogates, which Python's reader keeps and others replace
        return json.loads(text, object_pairs_hook=_object, parse_float=_finite, parse_constant=_no_constant)
    except _Ambiguous as exc:
        raise Refused(400, "invalid_request_error", f"request body is ambiguous: {exc}") from None
    except (ValueError, RecursionError):  # JSONDecodeError, orjson's too
        raise Refused(400, "invalid_request_error", "request body is not valid JSON") from None


def field(obj: object, name: str) -> object:
    """`obj[name]` as an upstream reads it (any spelling `field_key` matches; the parser refused two)."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    if isinstance(obj, JsonObject):
        key = obj.by_field.get(field_key(name))
        return obj[key] if key is not None else None
    wanted = field_key(name)
    return next((value for k, value in obj.items() if field_key(k) == wanted), None)


def field_at(obj: object, path: Sequence[str]) -> object:
    """The value at a path of fields (`generationConfig`, `candidateCount`), None where one is missing."""
    for name in path:
        obj = field(obj, name)
    return obj


def replace_field(obj: dict[str, object], name: str, value: object) -> None:
    """Set `name`, removing every other spelling of it (an upstream must see one `model`)."""
    key = field_key(name)
    for k in [k for k in obj if field_key(k) == key]:
        del obj[k]
    obj[name] = value
