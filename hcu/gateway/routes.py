"""What a guest may reach through the gateway: its task scope, then one of its provider's allowed routes.

Each provider lists the (method, path pattern) pairs its CLIs need: generation, token counting, model listing.
Anything else (files, batches, fine-tunes, admin endpoints, other methods) is answered 404 and never goes
upstream with the real credential. Path segments are plain names: no dot segments, no percent-encoding
(an encoded slash cannot smuggle a segment past the patterns), and the patterns match the whole path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hcu.gateway.refusal import Refused

SEGMENT = r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}"
"""One path segment: a name that cannot be `.` or `..` and carries no percent-encoding."""
_SCOPE = re.compile(SEGMENT)
_UNSAFE_PATH = re.compile(r"%|\\|(^|/)\.\.?(/|$)|//")

RouteKind = Literal["generation", "free"]
"""`generation` uses the task's budget when it succeeds; `free` (token counting, model listing) never does."""


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    kind: RouteKind


def route(method: str, pattern: str, kind: RouteKind = "generation") -> Route:
    """A route from a readable pattern: `{name}` stands for one path segment (see SEGMENT)."""
    return Route(method, re.compile(pattern.replace("{name}", SEGMENT)), kind)


def valid_scope(task: str) -> bool:
    return _SCOPE.fullmatch(task) is not None


def match_route(routes: tuple[Route, ...], method: str, rest: str) -> Route | None:
    """The route serving `method /<rest>` (rest: the raw path after the task scope), or None."""
    if _UNSAFE_PATH.search(rest):
        return None
    for candidate in routes:
        if candidate.method == method and candidate.pattern.fullmatch(rest):
            return candidate
    return None


def filter_query(raw_query: str, allowed: Mapping[str, frozenset[str] | None]) -> str:
    """Only the query parameters of the provider's API (`api-version`, `beta`, `alt`); anything else, such as
    a client's `key=` or `access_token=`, is dropped. Refused (403) for a value the API's CLIs never send
    (`alt=proto`), and for a parameter given twice (upstreams differ on which one they read)."""
    if not raw_query:
        return ""
    kept: dict[str, str] = {}
    for part in raw_query.split("&"):
        name, _, value = part.partition("=")
        if name not in allowed:
            continue
        if name in kept:
            raise Refused(403, "unsupported_request", f"query parameter {name} is given twice")
        values = allowed[name]
        if values is not None and value not in values:
            raise Refused(403, "unsupported_request", f"{name}={value[:40]}: the gateway serves only "
                          f"{' or '.join(f'{name}={v}' for v in sorted(values))}")
        kept[name] = part
    return "&".join(kept.values())
