"""The charts' geometry without a browser: scales and ticks, an interval drawn where its numbers say, bins that
hold what they say, a step series held until its next point, and every chart and mark titled."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from hcu.osworld.view.plots import (
    Category,
    Estimate,
    Placed,
    Ranked,
    Series,
    bins_of,
    clock,
    estimate_rows,
    histogram,
    interval_scatter,
    ranked_points,
    series_chart,
)
from hcu.osworld.view.svg import (
    Fill,
    Frame,
    Linear,
    count_step,
    nice_domain,
    nice_step,
    polyline_points,
    ticks,
    time_step,
)

CATEGORIES = (Category("pass", Fill("#16803c")), Category("fail", Fill("#b42318", "hatch")))


def parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def marks(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter("g") if g.get("data-mark") == kind]


def tip(mark: ET.Element) -> str:
    return mark.find("title").text or ""


def test_a_linear_scale_maps_its_ends_and_runs_either_way() -> None:
    x = Linear(0.0, 1.0, 100.0, 300.0)
    assert (x(0.0), x(0.5), x(1.0)) == (100.0, 200.0, 300.0)
    y = Linear(0.0, 10.0, 200.0, 20.0)  # pixels grow downwards
    assert (y(0.0), y(10.0), y(2.5)) == (200.0, 20.0, 155.0)
    assert y.clamped(12.0) == 20.0 and y.clamped(-1.0) == 200.0
    assert Linear(3.0, 3.0, 0.0, 10.0)(3.0) == 5.0, "a single value sits in the middle"


@pytest.mark.parametrize("span, count, step", [(10, 5, 2), (1, 5, 0.2), (7, 5, 2), (0.37, 4, 0.1), (94, 5, 20),
                                               (1200, 5, 250)])
def test_nice_steps_are_one_two_two_and_a_half_or_five_times_a_power_of_ten(span: float, count: int,
                                                                             step: float) -> None:
    assert nice_step(span, count) == pytest.approx(step)


def test_ticks_domains_and_the_steps_of_counts_and_clocks() -> None:
    assert ticks(0.0, 1.0, 0.2) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert ticks(-1.0, 1.0, 0.5) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert ticks(75.0, 140.0, 10.0) == [80.0, 90.0, 100.0, 110.0, 120.0, 130.0, 140.0]
    assert nice_domain(3.0, 97.0, 5) == (0.0, 100.0, 20.0)
    assert (count_step(4, 12), count_step(60, 12)) == (1.0, 5.0)
    assert (time_step(600, 6), time_step(7200, 6), time_step(50, 6), time_step(10 * 86400, 6)) == (
        120.0, 1800.0, 10.0, 2 * 86400.0)
    assert [clock(s) for s in (45, 90, 600, 3900, 7200)] == ["45s", "1m30s", "10m", "1h05m", "2h"]


def test_an_interval_is_drawn_where_its_numbers_say() -> None:
    row = Estimate("chrome", value=0.4, bar=0.3, low=0.2, high=0.6, note="40%", detail="score 40%")
    root = parsed(estimate_rows("c", "Scores", "one row", [row], x_label="score", keys=("lb", "score", "ci")))
    frame = Frame(float(root.get("width")), float(root.get("height")))
    (estimate,) = marks(root, "estimate")
    lines = [line for line in estimate.iter("line")]
    axis = [t for t in root.iter("text") if t.text == "0%"][0]
    x0 = float(axis.get("x"))
    x1 = float([t for t in root.iter("text") if t.text == "100%"][0].get("x"))
    assert x1 > x0 and frame.width > x1
    whisker = lines[0]
    assert float(whisker.get("x1")) == pytest.approx(x0 + 0.2 * (x1 - x0), abs=0.01)
    assert float(whisker.get("x2")) == pytest.approx(x0 + 0.6 * (x1 - x0), abs=0.01)
    caps = [float(line.get("x1")) for line in lines[1:]]
    assert caps == [pytest.approx(float(whisker.get("x1"))), pytest.approx(float(whisker.get("x2")))]
    dot = estimate.find("circle")
    assert float(dot.get("cx")) == pytest.approx(x0 + 0.4 * (x1 - x0), abs=0.01)
    bar = estimate.find("rect")
    assert (float(bar.get("x")), float(bar.get("width"))) == (pytest.approx(x0), pytest.approx(0.3 * (x1 - x0),
                                                                                               abs=0.01))
    assert tip(estimate) == "chrome: score 40%"


def test_bins_hold_what_their_titles_say() -> None:
    values = [(10.0, "pass"), (10.0, "fail"), (19.9, "fail"), (55.0, "pass"), (100.0, "pass")]
    root = parsed(histogram("h", "Durations", "five values", values, CATEGORIES, x_label="s", unit="attempts",
                            fmt=lambda v: f"{v:g}", bins=10))
    bars = marks(root, "bar")
    assert sum(int(b.get("data-count")) for b in bars) == len(values)
    held = {(float(b.get("data-low")), float(b.get("data-high")), b.get("data-category")): int(b.get("data-count"))
            for b in bars}
    assert held == {(10.0, 20.0, "pass"): 1, (10.0, 20.0, "fail"): 2, (50.0, 60.0, "pass"): 1,
                    (90.0, 100.0, "pass"): 1}, "the largest value falls in the last bin"
    assert tip(next(b for b in bars if b.get("data-category") == "fail")) == "10 to 20: 2 attempts fail"


def test_whole_numbers_get_bins_centred_on_their_ticks() -> None:
    assert bins_of([3.0, 4.0, 6.0], 12, count_step, discrete=True) == (2.5, 1.0, 4)
    lo, step, count = bins_of([0.0, 37.0, 120.0], 12, count_step, discrete=True)
    assert (lo, step, count) == (-0.5, 20.0, 7), "121 numbers in at most 12 bins: 7 of 20"
    root = parsed(histogram("h", "Calls", "calls", [(3.0, "pass"), (6.0, "fail")], CATEGORIES, x_label="calls",
                            unit="attempts", fmt=lambda v: f"{v:g}", step_of=count_step, discrete=True))
    assert [tip(b) for b in marks(root, "bar")] == ["3: 1 attempts pass", "6: 1 attempts fail"]
    labels = [t.text for t in root.find("g[@data-axis='x']").iter("text")]
    assert labels == ["3", "4", "5", "6", "calls"]


def test_a_step_series_holds_its_value_until_the_next_point() -> None:
    x, y = Linear(0.0, 10.0, 0.0, 100.0), Linear(0.0, 4.0, 40.0, 0.0)
    points = [(0.0, 1.0), (5.0, 3.0), (10.0, 2.0)]
    assert polyline_points(points, x, y, step=True) == "M0 30H50V10H100V20"
    assert polyline_points(points, x, y) == "M0 30L50 10L100 20"
    assert polyline_points([], x, y) == ""


def test_series_over_time_are_told_apart_without_colour() -> None:
    running = Series("running attempts", [(0.0, 0.0), (60.0, 4.0), (300.0, 2.0)])
    limit = Series("admission limit", [(0.0, 4.0), (300.0, 4.0)])
    root = parsed(series_chart("s", "Over time", "two series", [running, limit], x_label="run time",
                               y_label="attempts"))
    series = marks(root, "series")
    assert [tip(s) for s in series] == ["running attempts: 3 points, from 0 to 4, last 2",
                                        "admission limit: 2 points, from 4 to 4, last 4"]
    dashes = [s.find("path").get("stroke-dasharray") for s in series]
    assert dashes[0] is None and dashes[1] == "6 3"
    assert [t.find("title").text for t in series[0].iter("circle")] == [
        "running attempts at 0s: 0", "running attempts at 1m: 4", "running attempts at 5m: 2"]
    assert [t.text for t in root.find("g[@data-axis='x']").iter("text")][:2] == ["0s", "1m"]


def test_ranked_points_put_the_largest_first_and_mark_the_ones_that_matter() -> None:
    points = [Ranked("a", 0.0, False, "a: 0"), Ranked("b", 1.0, True, "b: +1"), Ranked("c", -0.5, True, "c: -0.5")]
    root = parsed(ranked_points("r", "Differences", "three tasks", points, y_label="diff", x_label="tasks",
                                keys=("discordant", "same"), reference=(0.1667, -0.4, 0.7, "mean +0.167")))
    drawn = marks(root, "point")
    assert [p.get("data-label") for p in drawn] == ["b", "a", "c"]
    assert [p.get("data-highlighted") for p in drawn] == ["yes", "no", "yes"]
    assert [p.find("path") is not None for p in drawn] == [True, False, True], "diamonds, not colour alone"
    assert tip(marks(root, "reference")[0]) == "mean +0.167"


def test_every_chart_is_an_image_titled_and_described_and_every_mark_titled() -> None:
    charts = [
        estimate_rows("e", "Scores", "rows", [Estimate("x", None, 0.5, None, None, "≥ 50%", "withheld")],
                      x_label="score", keys=("lb", "score", "ci")),
        histogram("h", "Durations", "bins", [(1.0, "pass")], CATEGORIES, x_label="s", unit="attempts",
                  fmt=str),
        interval_scatter("p", "Score against cost", "two runs", [
            Placed("a", 0.5, 0.4, 0.3, 0.5, "circle", "a"), Placed("b", 1.5, 0.6, 0.5, 0.7, "square", "b")],
            x_label="USD", y_label="score", x_fmt=lambda v: f"${v:g}"),
    ]
    for svg in charts:
        root = parsed(svg)
        assert root.get("role") == "img" and root.get("aria-labelledby") == f"{root.get('id')}-title " \
                                                                            f"{root.get('id')}-desc"
        assert root.find("title").text and root.find("desc").text
        drawn = [g for g in root.iter("g") if g.get("data-mark")]
        assert drawn and all(tip(g) for g in drawn)
        assert "http" not in svg, "no namespace or link: nothing a page could fetch"
