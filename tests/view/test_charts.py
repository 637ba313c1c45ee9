"""The charts as a person sees them, in Debian's headless Chromium: on the served run page and compare page, and in
the static export opened from disk with the network switched off. Each chart is drawn (a laid-out SVG image with
its title, description and axis labels), holds the marks the sample runs call for (counted from how the samples
were built, not from the chart code), and every mark's title gives its figures; nothing is fetched from
anywhere but the viewer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import orjson
import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.view.browser import chromium, wait_for
from tests.view.conftest import Served, export_of
from tests.view.sample_run import SampleRun

pytestmark = pytest.mark.browser
CSS = "css selector"
SCORE = {"pass": 1.0, "retried_pass": 1.0, "partial": 0.5, "fail": 0.0, "timeout": 0.0, "read_nothing": 0.0}
"""The score that counts for each sample outcome (evaluator_error and no_result have none)."""
BAND = {"pass": "pass", "retried_pass": "pass", "partial": "partial", "fail": "fail", "timeout": "fail",
        "read_nothing": "fail", "evaluator_error": "withheld"}
"""The outcome an attempt's bar is filled by; no_result attempts have neither a duration nor a count of calls."""
RUN_CHARTS = {"chart-domains": ["score (mean of task means)"], "chart-durations": ["attempt duration", "attempts"],
              "chart-calls": ["model calls", "attempts"]}
COMPARE_CHARTS = {"chart-paired": ["view-a minus view-b"], "chart-cost": ["cost per valid result (USD)", "score"]}


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    yield from chromium(tmp_path / "profile")


def marks(driver: WebDriver, chart_id: str, kind: str) -> list[WebElement]:
    return driver.find_elements(CSS, f'svg#{chart_id} g[data-mark="{kind}"]')


def content(element: WebElement) -> str:
    return element.get_attribute("textContent") or ""


def tip(mark: WebElement) -> str:
    """What the browser shows on hovering the mark: its <title>."""
    return content(mark.find_element(CSS, ":scope > title"))


def check_drawn(driver: WebDriver, charts: dict[str, list[str]]) -> None:
    """Every chart is a laid-out image with a title, a description and its axis labels; every mark is titled and
    takes up room."""
    for chart_id, labels in charts.items():
        svg = wait_for(driver, lambda d, i=chart_id: d.find_element(CSS, f"svg#{i}"), chart_id)
        assert svg.get_attribute("role") == "img" and svg.size["width"] > 300 and svg.size["height"] > 100
        assert content(svg.find_element(CSS, ":scope > title")) and content(svg.find_element(CSS, ":scope > desc"))
        texts = {content(t) for t in svg.find_elements(CSS, "text")}
        assert set(labels) <= texts, f"{chart_id}: axis labels {labels} missing from {sorted(texts)[:20]}"
        drawn = svg.find_elements(CSS, "g[data-mark]")
        assert drawn and all(tip(m) for m in drawn)
        sizes = driver.execute_script("return arguments[0].map(m => m.getBBox().width + m.getBBox().height)", drawn)
        assert all(size > 0 for size in sizes), f"{chart_id}: a mark without size"


def fetched(driver: WebDriver) -> list[str]:
    """Every URL the page loaded or links a resource from."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".concat(Array.from(document.querySelectorAll('[src], link[href]')).map(e => e.src || e.href))")


def check_run_charts(driver: WebDriver, sample: SampleRun) -> None:
    check_drawn(driver, RUN_CHARTS)
    config = orjson.loads((sample.run_dir / "config.json").read_bytes())
    domains = sorted({task["task_domain"] for task in config["tasks"]})
    estimates = marks(driver, "chart-domains", "estimate")
    assert [e.get_attribute("data-label") for e in estimates] == ["all tasks", *domains]
    assert tip(estimates[0]).startswith("all tasks: score withheld; lower bound ")
    expected = Counter(BAND[a.outcome] for a in sample.attempts if a.outcome != "no_result")
    for chart_id in ("chart-durations", "chart-calls"):
        counted: Counter[str] = Counter()
        for bar in marks(driver, chart_id, "bar"):
            counted[bar.get_attribute("data-category")] += int(bar.get_attribute("data-count"))
            assert tip(bar).endswith(f"{bar.get_attribute('data-count')} attempts {bar.get_attribute('data-category')}")
        assert counted == expected, chart_id


def task_means(sample: SampleRun) -> dict[str, Fraction | None]:
    scores: dict[str, list[float]] = {}
    for attempt in sample.attempts:
        scores.setdefault(attempt.task_id, []).extend([SCORE[attempt.outcome]] if attempt.outcome in SCORE else [])
    return {task: Fraction(sum(Fraction(s) for s in got)) / len(got) if got else None for task, got in scores.items()}


def check_compare_charts(driver: WebDriver, sample: SampleRun, other: SampleRun) -> None:
    check_drawn(driver, COMPARE_CHARTS)
    this, there = task_means(sample), task_means(other)
    both = [task for task in this if this[task] is not None and there.get(task) is not None]
    discordant = {task for task in both if this[task] != there[task]}
    points = marks(driver, "chart-paired", "point")
    assert len(points) == len(both)
    assert {p.get_attribute("data-label") for p in points if p.get_attribute("data-highlighted") == "yes"} == discordant
    assert driver.find_elements(CSS, "svg#chart-paired g[data-mark=point] path")  # diamonds, not colour alone
    values = [float(p.get_attribute("data-value")) for p in points]
    assert values == sorted(values, reverse=True)
    assert len(marks(driver, "chart-paired", "reference")) == 1
    (placed,) = marks(driver, "chart-cost", "point")  # view-b's cost is unknown: only view-a is placed
    assert tip(placed).startswith("view-a: lower bound (tasks withheld) ") and "$0.0500 per valid result" in tip(placed)
    section = driver.find_element(CSS, "#charts").find_element("xpath", "..")
    assert "Not drawn: view-b: cost per valid result unknown." in section.text


def test_the_served_pages_draw_their_charts_from_the_viewer_alone(driver: WebDriver, served: Served,
                                                                  sample: SampleRun, other_sample: SampleRun) -> None:
    driver.get(served.url + "/")
    check_run_charts(driver, sample)
    assert all(url.startswith(served.url + "/") for url in fetched(driver)), fetched(driver)
    driver.get(served.url + "/compare")
    check_compare_charts(driver, sample, other_sample)
    assert all(url.startswith(served.url + "/") for url in fetched(driver)), fetched(driver)


def test_the_static_export_holds_the_charts_offline(driver: WebDriver, sample: SampleRun, other_sample: SampleRun,
                                                    tmp_path: Path) -> None:
    out = export_of(sample, other_sample, tmp_path / "site")
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                                "downloadThroughput": -1, "uploadThroughput": -1})
    driver.get((out / "index.html").as_uri())
    check_run_charts(driver, sample)
    assert all(url.startswith(out.as_uri() + "/") for url in fetched(driver)), fetched(driver)
    driver.get((out / "compare.html").as_uri())
    check_compare_charts(driver, sample, other_sample)
    for page in ("index.html", "compare.html"):
        html = (out / page).read_text()
        assert "<svg " in html and not any(f'{attr}="http' in html for attr in ("src", "href", "xlink:href"))
