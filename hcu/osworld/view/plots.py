"""The kinds of chart the viewer draws, from plain figures (no run records), over svg.py's primitives: estimates with
their intervals in rows, a stacked histogram, points ranked by value, points with intervals on two axes, and
series over time (a count held until it changes, or a rate between samples).

Each returns a whole chart (svg.chart); every mark's `<title>` holds its values as text."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from hcu.osworld.view.svg import (
    DIM,
    INK,
    Fill,
    Frame,
    Linear,
    chart,
    count_step,
    element,
    fill_attrs,
    legend,
    mark,
    nice_domain,
    nice_step,
    number,
    pattern_defs,
    polyline_points,
    swatch,
    text,
    ticks,
    time_step,
    title,
    x_axis,
    y_axis,
)

WIDTH = 640
ROW = 24
BAR = Fill("#b4cbfa")
ACCENT = "#2f5bd3"
HIGHLIGHT = "#b42318"
DASHES = (None, "6 3", "2 3", "8 3 2 3")
"""Line patterns of successive series: solid, dashed, dotted, dash-dot (told apart without colour)."""
MARKED_POINTS = 120
"""A series with at most this many points gets a marker with a title at each."""


def percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def clock(seconds: float) -> str:
    """Seconds as a clock reads them: 45s, 1m30s, 10m, 1h05m, 2h."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, sec = divmod(rest, 60)
    if hours:
        return f"{hours}h" if not rest else f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m" if not sec else f"{minutes}m{sec:02d}s"
    return f"{sec}s"


def _line(x1: float, x2: float, y1: float, y2: float) -> str:
    return element("line", {"x1": x1, "x2": x2, "y1": y1, "y2": y2, "stroke": INK, "stroke_width": 1.5})


def across(x: Linear, at: float, low: float, high: float, cap: float = 5) -> str:
    """An interval along x at pixel row `at`: a line with end caps."""
    a, b = x(low), x(high)
    return _line(a, b, at, at) + _line(a, a, at - cap, at + cap) + _line(b, b, at - cap, at + cap)


def upright(y: Linear, at: float, low: float, high: float, cap: float = 5) -> str:
    """An interval along y at pixel column `at`: a line with end caps."""
    a, b = y(low), y(high)
    return _line(at, at, a, b) + _line(at - cap, at + cap, a, a) + _line(at - cap, at + cap, b, b)


def _shape(kind: str, cx: float, cy: float, size: float, **paint: object) -> str:
    if kind == "square":
        return element("rect", {"x": cx - size, "y": cy - size, "width": 2 * size, "height": 2 * size, **paint})
    if kind == "diamond":
        d = f"M{number(cx)} {number(cy - size)}L{number(cx + size)} {number(cy)}L{number(cx)} " \
            f"{number(cy + size)}L{number(cx - size)} {number(cy)}Z"
        return element("path", {"d": d, **paint})
    return element("circle", {"cx": cx, "cy": cy, "r": size, **paint})


@dataclass(frozen=True)
class Estimate:
    """One row of an estimates chart: a bar from 0, a point estimate and its interval."""

    label: str
    value: float | None
    """The point (None: withheld, no point drawn)."""
    bar: float
    low: float | None
    high: float | None
    note: str
    """The row's figures, short, written right of it."""
    detail: str
    """The row's figures in full: its mark's title."""
    strong: bool = False
    """A total row (its label in bold)."""


def estimate_rows(chart_id: str, name: str, description: str, rows: Sequence[Estimate], *, x_label: str,
                  keys: tuple[str, str, str]) -> str:
    """Rows of estimates on a 0-100% axis; `keys`: the legend's words for the bar, the point and the interval."""
    label_width = min(220.0, max(60.0, 6.6 * max(len(row.label) for row in rows) + 14))
    frame = Frame(WIDTH, 30 + ROW * len(rows) + 40, left=label_width, right=170, top=30)
    x = Linear(0.0, 1.0, frame.x0, frame.x1)
    body = [x_axis(frame, x, ticks(0.0, 1.0, 0.2), x_label, percent)]
    for i, row in enumerate(rows):
        mid = frame.y1 + (i + 0.5) * ROW
        shapes = [element("rect", {"x": frame.x0, "y": mid - 5, "width": max(x(row.bar) - frame.x0, 0.0),
                                   "height": 10, **fill_attrs(chart_id, BAR)})]
        if row.low is not None and row.high is not None:
            shapes.append(across(x, mid, row.low, row.high))
        if row.value is not None:
            shapes.append(_shape("circle", x(row.value), mid, 4.5, fill=INK, stroke="#fff"))
        shapes.append(text(frame.x0 - 6, mid + 4, row.label, anchor="end", weight="bold" if row.strong else None))
        shapes.append(text(frame.x1 + 8, mid + 4, row.note, fill=DIM))
        body.append(mark("estimate", f"{row.label}: {row.detail}", "".join(shapes), label=row.label))
    point = _shape("circle", 6, 6, 4.5, fill=INK)
    whisker = across(Linear(0.0, 1.0, 1.0, 11.0), 6, 0.0, 1.0, cap=4)
    body.append(legend(chart_id, frame.x0, 16, [(swatch(chart_id, BAR), keys[0]), (point, keys[1]),
                                                (whisker, keys[2])]))
    return chart(chart_id, name, description, frame, "".join(body))


@dataclass(frozen=True)
class Category:
    name: str
    fill: Fill


def bins_of(values: Sequence[float], bins: int, step_of: Callable[[float, int], float], *,
            discrete: bool = False) -> tuple[float, float, int]:
    """(first edge, width, count) of about `bins` equal bins on whole steps covering the values. `discrete` (whole
    numbers) puts the edges halfway between numbers, so a bin of width 1 holds one number, centred on its tick."""
    low, high = min(values, default=0.0), max(values, default=1.0)
    if discrete:
        step = step_of(high - low + 1, bins)
        first = math.floor(low / step) * step
        return first - 0.5, step, int((high - first) // step) + 1
    lo, hi, step = nice_domain(low, high, bins, step_of)
    return lo, step, max(1, round((hi - lo) / step))


def histogram(chart_id: str, name: str, description: str, values: Sequence[tuple[float, str]],
              categories: Sequence[Category], *, x_label: str, unit: str, fmt: Callable[[float], str],
              step_of: Callable[[float, int], float] = nice_step, bins: int = 12, discrete: bool = False) -> str:
    """Values counted in bins of equal width, each bin's count stacked by category (a value's second part names its
    category); one mark per nonzero (bin, category). `discrete`: whole numbers, a bin titled by the numbers it
    holds."""
    lo, step, count = bins_of([value for value, _ in values], bins, step_of, discrete=discrete)
    hi = lo + count * step
    counts = Counter((min(max(int((value - lo) // step), 0), count - 1), category) for value, category in values)
    stacks = [sum(counts[(b, c.name)] for c in categories) for b in range(count)]
    frame = Frame(WIDTH, 240, left=48, right=28, top=30)
    x = Linear(lo, hi, frame.x0, frame.x1)
    _, top, y_step = nice_domain(0.0, float(max(stacks, default=1)), 4, count_step)
    y = Linear(0.0, top, frame.y0, frame.y1)
    every = step * (1 if count <= 12 else 2)
    edges = ticks(lo + 0.5, hi, every) if discrete else ticks(lo, hi, every)
    body = [pattern_defs(chart_id, [c.fill for c in categories]),
            y_axis(frame, y, ticks(0.0, top, y_step), unit, lambda v: f"{v:g}"),
            x_axis(frame, x, edges, x_label, fmt, grid=False)]
    for b in range(count):
        start, end, below = lo + b * step, lo + (b + 1) * step, 0
        span = (fmt(start + 0.5) if step == 1 else f"{fmt(start + 0.5)} to {fmt(end - 0.5)}") if discrete else (
            f"{fmt(start)} to {fmt(end)}")
        for category in categories:
            n = counts[(b, category.name)]
            if not n:
                continue
            rect = element("rect", {"x": x(start) + 1, "y": y(below + n), "width": max(x(end) - x(start) - 2, 1.0),
                                    "height": y(below) - y(below + n), **fill_attrs(chart_id, category.fill)})
            body.append(mark("bar", f"{span}: {n} {unit} {category.name}", rect, category=category.name, count=n,
                             low=f"{start:g}", high=f"{end:g}"))
            below += n
    shown = [c for c in categories if any(counts[(b, c.name)] for b in range(count))]
    body.append(legend(chart_id, frame.x0, 16, [(swatch(chart_id, c.fill), c.name) for c in shown]))
    return chart(chart_id, name, description, frame, "".join(body))


@dataclass(frozen=True)
class Ranked:
    """A point of a ranked chart: its value, whether it is one of the points that matter, its title."""

    label: str
    value: float
    highlighted: bool
    detail: str


def ranked_points(chart_id: str, name: str, description: str, points: Sequence[Ranked], *, y_label: str,
                  x_label: str, keys: tuple[str, str], y_domain: tuple[float, float] = (-1.0, 1.0),
                  reference: tuple[float, float | None, float | None, str] | None = None) -> str:
    """Points in order of value, largest first: highlighted ones as filled diamonds, the others as small hollow
    circles (`keys` names the two); `reference` (value, low, high, title) is a dashed line with its interval."""
    frame = Frame(WIDTH, 260, left=52, top=30, bottom=36)
    ordered = sorted(points, key=lambda p: (-p.value, p.label))
    x = Linear(-0.5, max(len(ordered), 1) - 0.5, frame.x0 + 8, frame.x1 - 8)
    y = Linear(y_domain[0], y_domain[1], frame.y0, frame.y1)
    body = [y_axis(frame, y, ticks(*y_domain, nice_step(y_domain[1] - y_domain[0], 4)), y_label,
                   lambda v: f"{v:+g}" if v else "0"),
            element("line", {"x1": frame.x0, "x2": frame.x1, "y1": frame.y0, "y2": frame.y0, "stroke": DIM}),
            text((frame.x0 + frame.x1) / 2, frame.height - 8, x_label, anchor="middle"),
            element("line", {"x1": frame.x0, "x2": frame.x1, "y1": y(0.0), "y2": y(0.0), "stroke": INK})]
    if reference is not None:
        value, low, high, detail = reference
        band = (element("rect", {"x": frame.x0, "y": y.clamped(high), "width": frame.x1 - frame.x0,
                                 "height": y.clamped(low) - y.clamped(high), "fill": ACCENT, "fill_opacity": 0.12})
                if low is not None and high is not None else "")
        line = element("line", {"x1": frame.x0, "x2": frame.x1, "y1": y(value), "y2": y(value), "stroke": ACCENT,
                                "stroke_width": 1.5, "stroke_dasharray": "6 3"})
        body.append(mark("reference", detail, band + line))
    for i, point in enumerate(ordered):
        shape = (_shape("diamond", x(i), y(point.value), 5.5, fill=HIGHLIGHT, stroke="#fff") if point.highlighted
                 else _shape("circle", x(i), y(point.value), 2.5, fill="#fff", stroke=DIM, stroke_width=1.2))
        body.append(mark("point", point.detail, shape, label=point.label,
                         highlighted="yes" if point.highlighted else "no", value=f"{point.value:g}"))
    body.append(legend(chart_id, frame.x0, 16, [
        (_shape("diamond", 6, 6, 5.5, fill=HIGHLIGHT), keys[0]),
        (_shape("circle", 6, 6, 2.5, fill="#fff", stroke=DIM, stroke_width=1.2), keys[1])]
        + ([(element("line", {"x1": 0, "x2": 12, "y1": 6, "y2": 6, "stroke": ACCENT, "stroke_width": 1.5,
                              "stroke_dasharray": "6 3"}), "mean and its 95% interval")] if reference else [])))
    return chart(chart_id, name, description, frame, "".join(body))


Shape = Literal["circle", "square", "diamond"]


@dataclass(frozen=True)
class Placed:
    """A point with a vertical interval, in a shape of its own, labelled beside it."""

    label: str
    x: float
    y: float
    low: float | None
    high: float | None
    shape: Shape
    detail: str


def interval_scatter(chart_id: str, name: str, description: str, points: Sequence[Placed], *, x_label: str,
                     y_label: str, x_fmt: Callable[[float], str], y_fmt: Callable[[float], str] = percent,
                     y_domain: tuple[float, float] = (0.0, 1.0)) -> str:
    """Points on two axes (x from 0), each with its interval along y."""
    frame = Frame(WIDTH, 280, left=52, right=24, top=16)
    _, x_hi, x_step = nice_domain(0.0, max((p.x for p in points), default=1.0) * 1.15 or 1.0, 5)
    x = Linear(0.0, x_hi, frame.x0, frame.x1)
    y = Linear(y_domain[0], y_domain[1], frame.y0, frame.y1)
    body = [y_axis(frame, y, ticks(*y_domain, nice_step(y_domain[1] - y_domain[0], 5)), y_label, y_fmt),
            x_axis(frame, x, ticks(0.0, x_hi, x_step), x_label, x_fmt)]
    for point in points:
        px, py = x(point.x), y(point.y)
        shapes = upright(y, px, point.low, point.high) if point.low is not None and point.high is not None else ""
        shapes += _shape(point.shape, px, py, 6, fill=ACCENT if point.shape == "circle" else INK, stroke="#fff")
        shapes += text(px + 10, py - 8, point.label, weight="bold")
        body.append(mark("point", f"{point.label}: {point.detail}", shapes, label=point.label))
    return chart(chart_id, name, description, frame, "".join(body))


@dataclass(frozen=True)
class Series:
    """A quantity over time: (seconds since the chart's start, value) points, held until the next point (`step`: a
    count such as running attempts or a limit) or joined by straight lines (a rate)."""

    name: str
    points: Sequence[tuple[float, float]]
    step: bool = True
    colour: str = INK


def series_chart(chart_id: str, name: str, description: str, series: Sequence[Series], *, x_label: str,
                 y_label: str, y_fmt: Callable[[float], str] = lambda v: f"{v:g}",
                 x_fmt: Callable[[float], str] = clock, span: tuple[float, float] | None = None,
                 tip_fmt: Callable[[float], str] | None = None) -> str:
    """Series over time on one value axis from 0; each series a mark (its range in the title), drawn in its own line
    pattern, with a titled marker at each point when it has at most MARKED_POINTS. `span` fixes the time axis (charts
    drawn one above the other share it) and holds each step series' last value to its end; `tip_fmt` writes the
    values in titles (y_fmt's axis labels may round)."""
    tip = tip_fmt or y_fmt
    times = [t for s in series for t, _ in s.points] + list(span or ()) or [0.0]
    values = [v for s in series for _, v in s.points] or [1.0]
    frame = Frame(WIDTH, 260, left=56, right=28, top=30)  # room for the last time label (1h30m)
    t_lo, t_hi, t_step = nice_domain(min(times), max(times), 6, time_step)
    x = Linear(t_lo, t_hi, frame.x0, frame.x1)
    _, v_hi, v_step = nice_domain(0.0, max(values) or 1.0, 4)
    y = Linear(0.0, v_hi, frame.y0, frame.y1)
    body = [y_axis(frame, y, ticks(0.0, v_hi, v_step), y_label, y_fmt),
            x_axis(frame, x, ticks(t_lo, t_hi, t_step), x_label, x_fmt)]
    keys = []
    for i, s in enumerate(series):
        dash = DASHES[i % len(DASHES)]
        line = {"fill": "none", "stroke": s.colour, "stroke_width": 2, "stroke_dasharray": dash}
        shapes = element("path", {"d": polyline_points(s.points, x, y, step=s.step, until=span and span[1]), **line})
        if len(s.points) <= MARKED_POINTS:
            shapes += "".join(element("circle", {"cx": x(t), "cy": y(v), "r": 2.5, "fill": s.colour},
                                      title(f"{s.name} at {x_fmt(t)}: {tip(v)}")) for t, v in s.points)
        seen = [v for _, v in s.points]
        summary = (f"{s.name}: {len(seen)} points, from {tip(min(seen))} to {tip(max(seen))}, last "
                   f"{tip(seen[-1])}" if seen else f"{s.name}: no points")
        body.append(mark("series", summary, shapes, label=s.name, points=len(seen)))
        keys.append((element("line", {"x1": 0, "x2": 12, "y1": 6, "y2": 6, **line}), s.name))
    body.append(legend(chart_id, frame.x0, 16, keys))
    return chart(chart_id, name, description, frame, "".join(body))
