"""SVG drawn by hcu itself, for charts: scales and their ticks, the plot frame, axes, marks and a legend. No script,
no network, no chart library, and no stylesheet: every element carries its own presentation attributes, so a
chart looks the same inline in a page, as a file of its own and in any SVG reader.

Accessibility: a chart is an `<svg role="img">` whose `<title>` names it and whose `<desc>` says what it shows;
every mark has a `<title>` holding its values as text (the browser shows it on hover, a screen reader reads it)
and a `data-mark` naming its kind. Marks of different kinds differ by shape or fill pattern, never by colour alone.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

INK, DIM, GRID, PANEL = "#1d2330", "#6b7280", "#e3e6eb", "#ffffff"
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
TEXT_SIZE = 11
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
"""Tick steps of a time axis, in seconds: what a clock shows (never 2,500 s)."""


def attr(value: object) -> str:
    return html.escape(str(value), quote=True)


def number(value: float) -> str:
    """A coordinate, short: two decimals at most, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def element(tag: str, attrs: dict[str, object], body: str = "") -> str:
    """An SVG element; `body` is SVG (already escaped). Attributes that are None are left out."""
    shown = "".join(f' {key.replace("_", "-")}="{attr(number(v) if isinstance(v, float) else v)}"'
                    for key, v in attrs.items() if v is not None)
    return f"<{tag}{shown}>{body}</{tag}>" if body else f"<{tag}{shown}/>"


def title(text: str) -> str:
    return f"<title>{html.escape(text)}</title>"


def text(x: float, y: float, content: str, *, anchor: str = "start", size: int = TEXT_SIZE, fill: str = INK,
         weight: str | None = None, rotate: bool = False) -> str:
    """A label; `rotate` turns it a quarter left about its anchor point (a vertical axis's label)."""
    return element("text", {"x": x, "y": y, "text_anchor": anchor, "font_size": size, "font_family": FONT,
                            "fill": fill, "font_weight": weight,
                            "transform": f"rotate(-90 {number(x)} {number(y)})" if rotate else None},
                   html.escape(content))


def mark(kind: str, tip: str, shapes: str, **data: object) -> str:
    """One mark of a chart: its shapes in a group with a `<title>` of its values, `data-mark` its kind, and any
    `data-*` values a test or a script can read."""
    attrs: dict[str, object] = {"data_mark": kind, **{f"data_{key}": value for key, value in data.items()}}
    return element("g", attrs, title(tip) + shapes)


@dataclass(frozen=True)
class Linear:
    """A linear scale from the domain [lo, hi] onto the pixel range [start, end] (end < start for a y axis,
    whose pixels grow downwards)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return (self.start + self.end) / 2
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)

    def clamped(self, value: float) -> float:
        return self(min(max(value, min(self.lo, self.hi)), max(self.lo, self.hi)))


def nice_step(span: float, count: int, steps: Sequence[float] = NICE_STEPS) -> float:
    """The smallest step of the form s * 10^k (s in `steps`) that cuts `span` into at most `count` parts."""
    if span <= 0 or count < 1:
        return 1.0
    raw = span / count
    power = 10.0 ** math.floor(math.log10(raw))
    return next(s * power for s in steps if s * power >= raw * (1 - 1e-9))


def count_step(span: float, count: int) -> float:
    """A tick or bin step for counts: a whole number (1, 2, 5 times a power of ten)."""
    return max(1.0, nice_step(span, count, (1.0, 2.0, 5.0, 10.0)))


def time_step(span_sec: float, count: int) -> float:
    """A tick step for seconds that a clock shows (TIME_STEPS; whole days beyond them)."""
    raw = span_sec / max(count, 1)
    return float(next((s for s in TIME_STEPS if s >= raw), math.ceil(raw / 86400) * 86400))


def ticks(lo: float, hi: float, step: float) -> list[float]:
    """Multiples of `step` from lo to hi, both ends included when they fall on one."""
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(k * step, 10) for k in range(first, last + 1)]


def nice_domain(lo: float, hi: float, count: int, step_of: Callable[[float, int], float] = nice_step,
                ) -> tuple[float, float, float]:
    """(lo, hi, step) widened outwards to whole steps, so the axis starts and ends on a tick."""
    if hi <= lo:
        hi = lo + 1.0
    step = step_of(hi - lo, count)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


@dataclass(frozen=True)
class Frame:
    """A chart's canvas and the plot area inside its margins."""

    width: float
    height: float
    left: float = 56
    right: float = 16
    top: float = 14
    bottom: float = 40

    @property
    def x0(self) -> float:
        return self.left

    @property
    def x1(self) -> float:
        return self.width - self.right

    @property
    def y0(self) -> float:
        """The plot's bottom edge (pixels grow downwards)."""
        return self.height - self.bottom

    @property
    def y1(self) -> float:
        return self.top


def chart(chart_id: str, name: str, description: str, frame: Frame, body: str) -> str:
    """A whole chart: an inline `<svg role="img">` labelled by its title and description, the marks in `body`."""
    return element("svg", {"viewBox": f"0 0 {number(frame.width)} {number(frame.height)}", "width": frame.width,
                           "height": frame.height, "role": "img", "id": chart_id,
                           "aria_labelledby": f"{chart_id}-title {chart_id}-desc", "class": "chart"},
                   f'<title id="{attr(chart_id)}-title">{html.escape(name)}</title>'
                   f'<desc id="{attr(chart_id)}-desc">{html.escape(description)}</desc>'
                   + element("rect", {"width": frame.width, "height": frame.height, "fill": PANEL}) + body)


def x_axis(frame: Frame, scale: Linear, values: Iterable[float], label: str, fmt: Callable[[float], str], *,
           grid: bool = True) -> str:
    """Ticks and their labels under the plot, a vertical grid line at each, and the axis label below them."""
    parts = [element("line", {"x1": frame.x0, "x2": frame.x1, "y1": frame.y0, "y2": frame.y0, "stroke": DIM})]
    for value in values:
        x = scale(value)
        if grid:
            parts.append(element("line", {"x1": x, "x2": x, "y1": frame.y1, "y2": frame.y0, "stroke": GRID}))
        parts.append(element("line", {"x1": x, "x2": x, "y1": frame.y0, "y2": frame.y0 + 4, "stroke": DIM}))
        parts.append(text(x, frame.y0 + 16, fmt(value), anchor="middle", fill=DIM))
    parts.append(text((frame.x0 + frame.x1) / 2, frame.height - 6, label, anchor="middle"))
    return element("g", {"data_axis": "x"}, "".join(parts))


def y_axis(frame: Frame, scale: Linear, values: Iterable[float], label: str, fmt: Callable[[float], str], *,
           grid: bool = True) -> str:
    """Ticks and their labels left of the plot, a horizontal grid line at each, the axis label turned upright."""
    parts = [element("line", {"x1": frame.x0, "x2": frame.x0, "y1": frame.y1, "y2": frame.y0, "stroke": DIM})]
    for value in values:
        y = scale(value)
        if grid:
            parts.append(element("line", {"x1": frame.x0, "x2": frame.x1, "y1": y, "y2": y, "stroke": GRID}))
        parts.append(element("line", {"x1": frame.x0 - 4, "x2": frame.x0, "y1": y, "y2": y, "stroke": DIM}))
        parts.append(text(frame.x0 - 6, y + 4, fmt(value), anchor="end", fill=DIM))
    parts.append(text(12, (frame.y0 + frame.y1) / 2, label, anchor="middle", rotate=True))
    return element("g", {"data_axis": "y"}, "".join(parts))


@dataclass(frozen=True)
class Fill:
    """How a kind of mark is filled: a colour and a pattern (solid, hatched, dotted or hollow), so that kinds
    differ without colour."""

    colour: str
    pattern: str = "solid"
    """solid, hatch, dots or hollow."""


def pattern_defs(chart_id: str, fills: Iterable[Fill]) -> str:
    """The `<pattern>`s the fills need, with ids of this chart (`fill_url` names them)."""
    defs = []
    for fill in dict.fromkeys(fills):
        pid = _pattern_id(chart_id, fill)
        if fill.pattern == "hatch":
            body = (element("rect", {"width": 6, "height": 6, "fill": PANEL})
                    + element("path", {"d": "M0 6L6 0M-1 1L1 -1M5 7L7 5", "stroke": fill.colour, "stroke_width": 2}))
        elif fill.pattern == "dots":
            body = (element("rect", {"width": 6, "height": 6, "fill": PANEL})
                    + element("circle", {"cx": 3, "cy": 3, "r": 1.5, "fill": fill.colour}))
        else:
            continue
        defs.append(element("pattern", {"id": pid, "width": 6, "height": 6, "patternUnits": "userSpaceOnUse"}, body))
    return element("defs", {}, "".join(defs)) if defs else ""


def _pattern_id(chart_id: str, fill: Fill) -> str:
    return f"{chart_id}-{fill.pattern}-{fill.colour.lstrip('#')}"


def fill_attrs(chart_id: str, fill: Fill) -> dict[str, object]:
    """The presentation attributes of a shape filled so (pattern_defs must hold its pattern)."""
    if fill.pattern in ("hatch", "dots"):
        return {"fill": f"url(#{_pattern_id(chart_id, fill)})", "stroke": fill.colour}
    if fill.pattern == "hollow":
        return {"fill": PANEL, "stroke": fill.colour, "stroke_width": 1.5}
    return {"fill": fill.colour, "stroke": fill.colour}


def legend(chart_id: str, x: float, y: float, items: Sequence[tuple[str, str]]) -> str:
    """A row of keys from (x, y): each is a swatch (SVG drawn at 0,0 in a 12x12 box) and its label."""
    parts, at = [], x
    for swatch, label in items:
        parts.append(element("g", {"transform": f"translate({number(at)} {number(y - 9)})"}, swatch))
        parts.append(text(at + 16, y, label))
        at += 16 + 6.2 * len(label) + 14
    return element("g", {"data_legend": chart_id}, "".join(parts))


def swatch(chart_id: str, fill: Fill) -> str:
    return element("rect", {"x": 0.5, "y": 0.5, "width": 11, "height": 11, **fill_attrs(chart_id, fill)})


def polyline_points(points: Sequence[tuple[float, float]], x: Linear, y: Linear, *, step: bool = False,
                    until: float | None = None) -> str:
    """The `d` of a path through the points; `step` holds each value until the next point (a count that changes
    at events: running attempts, a limit), and the last one to `until` when given, else straight segments between
    them (a rate)."""
    if not points:
        return ""
    commands = [f"M{number(x(points[0][0]))} {number(y(points[0][1]))}"]
    for at, value in points[1:]:
        if step:
            commands.append(f"H{number(x(at))}V{number(y(value))}")
        else:
            commands.append(f"L{number(x(at))} {number(y(value))}")
    if step and until is not None and until > points[-1][0]:
        commands.append(f"H{number(x(until))}")
    return "".join(commands)
