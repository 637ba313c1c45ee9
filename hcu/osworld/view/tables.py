"""Filterable, sortable tables that stay fast at thousands of rows: the server renders each row's cells once,
ships rows with their filter and sort values as JSON inside the page, and viewer.js lists the first
ROWS_LISTED rows that match (all of them on request). The browser never lays out rows nobody looks at."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import orjson

from hcu.osworld.view.html import esc

ROWS_LISTED = 300
Column = tuple[str, str, str]
"""(header, the value it sorts on or "" for none, "num" or "text")."""
Row = tuple[dict[str, object], str]
"""(the row's filter and sort values, its cells as HTML)."""


def select(name: str, label: str, values: Counter[str], *, counts: bool = True) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc(v)}{f" ({n})" if counts else ""}</option>'
                      for v, n in sorted(values.items()) if v)
    return (f'<label>{esc(label)} <select data-filter="{name}" name="{name}"><option value="">all</option>'
            f"{options}</select></label>")


def number(name: str, kind: str, label: str, value: str) -> str:
    """An input matching rows whose `value` is at least (kind "min") or at most ("max") what is typed."""
    return (f'<label>{esc(label)} <input type="number" min="0" step="any" data-filter="{value}" '
            f'data-kind="{kind}" name="{name}"></label>')


def text(name: str, label: str, placeholder: str = "") -> str:
    return (f'<label>{esc(label)} <input type="search" data-filter="{name}" data-kind="text" name="{name}" '
            f'placeholder="{esc(placeholder)}"></label>')


def filter_form(table_id: str, controls: Sequence[str]) -> str:
    return (f'<form class="filters" data-for="{table_id}">{"".join(controls)}<button type="reset">reset</button>'
            f'<span class="count" data-count-for="{table_id}"></span>'
            f'<button type="button" data-show-all hidden>list all</button></form>')


def data_table(table_id: str, columns: Sequence[Column], rows: Sequence[Row]) -> str:
    heads = "".join(f'<th data-sort="{key}" data-type="{kind}">{esc(label)}</th>' if key else f"<th>{esc(label)}</th>"
                    for label, key, kind in columns)
    payload = orjson.dumps([{"d": {k: "" if v is None else str(v) for k, v in values.items()}, "h": cells}
                            for values, cells in rows]).decode().replace("</", "<\\/").replace("<!--", "\\u003c!--")
    return (f'<div class="table-wrap"><table class="grid sortable" id="{table_id}" data-rows="{table_id}-rows" '
            f'data-limit="{ROWS_LISTED}"><thead><tr>{heads}</tr></thead><tbody></tbody></table></div>'
            f'<script type="application/json" id="{table_id}-rows">{payload}</script>'
            f'<noscript><p class="absent">The table is listed by the page\'s script.</p></noscript>')
