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
              "chart-calls": ["model calls", "attempts"],
              "chart-quota-attempts": ["time since the run's first event", "attempts"],
              "chart-quota-tokens": ["time since the run's first event", "tokens per minute"]}
NO_VALID_RESULT = {"evaluator_error"}
"""Outcomes whose attempt in tasks/ gave no valid result (withheld; a no_result attempt, still running, has given
nothing yet); a retry's set-aside attempt gave none either."""
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


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def series(driver: WebDriver, chart_id: str) -> dict[str, WebElement]:
    return {m.get_attribute("data-label"): m for m in marks(driver, chart_id, "series")}


def marked(mark: WebElement) -> list[str]:
    """The values its point markers' titles give (`<name> at <time>: <value>`)."""
    return [content(t).rsplit(": ", 1)[1] for t in mark.find_elements(CSS, "circle > title")]


def check_quota_chart(driver: WebDriver, sample: SampleRun) -> None:
    """The running attempts step at each launch and exit of logs/queue.jsonl (and the queue's start), the limit at
    each limit event; the tokens per minute (one-minute bins) add up to the token log's tokens, all of them and those
    of attempts that gave no valid result; the quota line is the config's."""
    events = [e for e in lines(sample.run_dir / "logs" / "queue.jsonl")
              if e["event"] in ("start", "launch", "adopt", "exit", "limit")]
    running, now = [], 0
    for event in events:
        if event["event"] != "limit":
            now = 0 if event["event"] == "start" else now + (1 if event["event"] in ("launch", "adopt") else -1)
            running.append(f"{now:.3g}")
    drawn = series(driver, "chart-quota-attempts")
    assert marked(drawn["running attempts"]) == running and len(running) == 1 + 2 * len(sample.attempts) - sum(
        1 for a in sample.attempts if a.outcome == "no_result") + 2 * sum(1 for a in sample.attempts
                                                                         if a.outcome == "retried_pass")
    limits = [str(e["limit"]) for e in events if e["event"] == "limit"]
    assert marked(drawn["admission limit"]) == limits and len(limits) == 2
    assert {"rate-limit waits", "waits, no valid result"} <= set(drawn)
    rows = lines(sample.run_dir / "gateway-tokens.jsonl")
    outcome = {a.key: a.outcome for a in sample.attempts}

    def gave_none(scope: str) -> bool:
        key, attempt = scope.split(".", 1)[1].rsplit(".a", 1)
        return outcome[key] in NO_VALID_RESULT or (outcome[key] == "retried_pass" and attempt == "1")

    tokens = sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in rows)
    wasted = sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in rows if gave_none(r["task"]))
    per_minute = series(driver, "chart-quota-tokens")
    assert sum(int(v.replace(",", "")) for v in marked(per_minute["tokens per minute"])) == tokens
    assert sum(int(v.replace(",", "")) for v in marked(per_minute["no valid result"])) == wasted > 0
    assert marked(per_minute["quota 20,000 tpm"]) == ["20,000", "20,000"]
    waits = sum(r["rate_limit_wait_sec"] for r in rows)
    waited_for_nothing = sum(r["rate_limit_wait_sec"] for r in rows if gave_none(r["task"]))
    description = content(driver.find_element(CSS, "#chart-quota-attempts-desc"))
    assert f"({waits:,.0f} s waited over the run, {waited_for_nothing:,.0f} s of it in attempts that gave no valid " \
           "result)" in description


def check_waste_cards(driver: WebDriver, sample: SampleRun) -> None:
    """The cards beside the cost hold summary.json's figures."""
    summary = orjson.loads((sample.run_dir / "summary" / "summary.json").read_bytes())
    wasted, waits = summary["wasted"], summary["rate_limit_waits"]
    cards = {c.find_element(CSS, ".card-label").text.lower(): c for c in driver.find_elements(CSS, ".card")}
    spent = cards["spent without a valid result"]
    assert spent.find_element(CSS, ".card-value").text.startswith(f"${wasted['cost_usd']:.4f}")
    assert f"{wasted['attempts']} attempts ({wasted['set_aside']} set aside and retried, {wasted['withheld']} " \
           "withheld)" in spent.text
    assert wasted["set_aside"] == sum(1 for a in sample.attempts if a.outcome == "retried_pass") > 0
    assert wasted["withheld"] == sum(1 for a in sample.attempts if a.outcome == "evaluator_error") > 0
    assert cards["rate-limit waits"].find_element(CSS, ".card-value").text == f"{waits['wait_sec'] / 3600:.2f} h"


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
    check_quota_chart(driver, sample)
    check_waste_cards(driver, sample)
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
    check_quota_chart(driver, sample)
    assert all(url.startswith(out.as_uri() + "/") for url in fetched(driver)), fetched(driver)
    driver.get((out / "compare.html").as_uri())
    check_compare_charts(driver, sample, other_sample)
    for page in ("index.html", "compare.html"):
        html = (out / page).read_text()
        assert "<svg " in html and not any(f'{attr}="http' in html for attr in ("src", "href", "xlink:href"))
