"""The pieces every page is made of: escaping, number formats, badges, key-value grids, the page frame."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from typing import Any

import orjson

from hcu.osworld.view.links import Links

MISSING = "—"


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def score_text(score: float | None) -> str:
    return "withheld" if score is None else f"{score:g}" if score in (0.0, 1.0) else f"{score:.2f}"


def score_band(score: float | None, status: str) -> str:
    """pass, fail, partial, withheld (a result without a usable score) or none (no result yet)."""
    if score is None:
        return "none" if status in ("not started", "no result") else "withheld"
    return "pass" if score == 1.0 else "fail" if score == 0.0 else "partial"


def pct(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f}%"


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    if value < 60:
        return f"{value:.1f} s"
    minutes, sec = divmod(int(round(value)), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def count(value: int | float | None) -> str:
    return MISSING if value is None else f"{value:,.0f}"


def usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def when(unix: float | None) -> str:
    return MISSING if unix is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def badge(text: str, kind: str | None = None) -> str:
    return f'<span class="badge b-{esc(kind or text.replace(" ", "-"))}">{esc(text)}</span>'


def score_badge(score: float | None, status: str) -> str:
    band = score_band(score, status)
    return badge(status if band == "none" else score_text(score), band)


def kv(pairs: Iterable[tuple[str, str]], cls: str = "") -> str:
    """A key-value grid; values are HTML (escape them first)."""
    cells = "".join(f"<dt>{esc(key)}</dt><dd>{value}</dd>" for key, value in pairs)
    return f'<dl class="kv {cls}">{cells}</dl>'


def json_block(value: Any) -> str:
    """A JSON value (already redacted) as an indented block."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
    return f'<pre class="json">{esc(text)}</pre>'


def details(summary: str, body: str, *, opened: bool = False, cls: str = "") -> str:
    """A collapsible section; `summary` is HTML."""
    return (f'<details class="{cls}"{" open" if opened else ""}><summary>{summary}</summary>'
            f'<div class="details-body">{body}</div></details>')


def section(title: str, body: str, *, anchor: str = "", note: str = "") -> str:
    heading = f'<h2 id="{esc(anchor)}">{esc(title)}' if anchor else f"<h2>{esc(title)}"
    extra = f' <span class="note">{note}</span>' if note else ""
    return f'<section>{heading}{extra}</h2>{body}</section>'


def absent(what: str) -> str:
    return f'<p class="absent">{esc(what)}</p>'


def card(label: str, value: str, sub: str = "") -> str:
    """A headline figure; value and sub are HTML."""
    return (f'<div class="card"><div class="card-label">{esc(label)}</div><div class="card-value">{value}</div>'
            f'<div class="card-sub">{sub}</div></div>')


def page(title: str, body: str, links: Links, crumbs: list[tuple[str, str | None]]) -> str:
    """A whole document: the viewer's own CSS and JS (no other network), a breadcrumb bar, the body."""
    trail = " / ".join(f'<a href="{esc(href)}">{esc(text)}</a>' if href else f"<b>{esc(text)}</b>"
                       for text, href in crumbs)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="{esc(links.static("viewer.css"))}">'
            f'<script src="{esc(links.static("viewer.js"))}" defer></script></head>'
            f'<body><header class="top"><span class="brand">hcu view</span><nav>{trail}</nav></header>'
            f'<main>{body}</main></body></html>')
