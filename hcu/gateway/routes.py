"""What a guest may reach through the gateway: its task scope, then one of its provider's allowed routes.

Each provider lists the (method, path pattern) pairs its CLIs need: generation, token counting, model listing.
Anything else (files, batches, fine-tunes, admin endpoints, other methods) is answered 404 and never goes
upstream with the real credential. Path segments are plain names: no dot segments, no percent-encoding
(an encoded slash cannot smuggle a segment past the patterns), and the patterns match the whole path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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


def filter_query(raw_query: str, allowed: frozenset[str]) -> str:
    """Only the query parameters of the provider's API (`api-version`, `beta`, `alt`); anything else, such as
    a client's `key=` or `access_token=`, is dropped."""
    if not raw_query:
        return ""
    return "&".join(part for part in raw_query.split("&") if part.split("=", 1)[0] in allowed)
