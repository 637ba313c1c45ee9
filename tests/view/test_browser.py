"""The viewer as a person uses it, in Debian's headless Chromium: the served run page (filter, sort, the filter
kept in the address), a task's step N with its screenshot and click mark, the compare view (disagreeing tasks
first, one task's steps side by side), and the static export opened from disk doing the same."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.view.browser import chromium, image_loaded, mark_fraction, visible_rows, wait_for
from tests.view.conftest import Served, export_of
from tests.view.sample_run import SCREEN, SampleRun, pointer_of

pytestmark = pytest.mark.browser
CSS = "css selector"
STEP = 3


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    yield from chromium(tmp_path / "profile")


def domains_of(sample: SampleRun) -> Counter[str]:
    config = orjson.loads((sample.run_dir / "config.json").read_bytes())
    domain = {task["id"]: task["task_domain"] for task in config["tasks"]}
    return Counter(domain[a.task_id] for a in sample.attempts)


def count_text(driver: WebDriver, table: str) -> str:
    return driver.find_element(CSS, f'[data-count-for="{table}"]').text


def check_run_page(driver: WebDriver, url: str, sample: SampleRun) -> None:
    """Filter by domain, failure class and score; sort by duration."""
    total = len(sample.attempts)
    driver.get(url)
    wait_for(driver, lambda d: count_text(d, "tasks").startswith(f"{total} of {total} shown"), "the table's count")
    domain, expected = domains_of(sample).most_common(1)[0]
    Select(driver.find_element(CSS, "select[name=domain]")).select_by_value(domain)
    rows = visible_rows(driver, "tasks")
    assert len(rows) == expected and {row.get_attribute("data-domain") for row in rows} == {domain}
    assert count_text(driver, "tasks").startswith(f"{expected} of {total} shown")
    driver.find_element(CSS, "form.filters button[type=reset]").click()
    wait_for(driver, lambda d: len(visible_rows(d, "tasks")) == total, "the reset")
    Select(driver.find_element(CSS, "select[name=class]")).select_by_value("evaluator")
    failed = sum(1 for a in sample.attempts if a.outcome == "evaluator_error")
    assert {row.get_attribute("data-status") for row in visible_rows(driver, "tasks")} == {"evaluator_error"}
    assert len(visible_rows(driver, "tasks")) == failed
    Select(driver.find_element(CSS, "select[name=class]")).select_by_value("")
    Select(driver.find_element(CSS, "select[name=band]")).select_by_value("partial")
    assert {row.get_attribute("data-score") for row in visible_rows(driver, "tasks")} == {"0.5"}
    Select(driver.find_element(CSS, "select[name=band]")).select_by_value("")
    header = driver.find_element(CSS, '#tasks th[data-sort="duration"]')
    header.click()
    header.click()
    durations = [row.get_attribute("data-duration") for row in visible_rows(driver, "tasks")]
    known = [float(d) for d in durations if d]
    assert known == sorted(known, reverse=True) and len(set(known)) > 1
    assert durations[len(known):] == [""] * (len(durations) - len(known)), "attempts without a duration last"


def check_step(driver: WebDriver, sample: SampleRun, key: str) -> None:
    """Step STEP's screenshot loads and the click mark sits where the pointer landed."""
    wait_for(driver, lambda d: d.find_elements(CSS, "article.step"), "the steps")
    actions = ActionChains(driver)
    for _ in range(STEP):
        actions.send_keys("j")
    actions.perform()
    step = wait_for(driver, lambda d: d.find_element(CSS, "article.step.current"), "the current step")
    assert step.get_attribute("id") == f"step-{STEP}"
    figure = step.find_element(CSS, "figure.shot")
    image = figure.find_element(CSS, "img")
    assert image.get_attribute("src").endswith(f"tasks/{key}/steps/step-{STEP:03d}.png")
    wait_for(driver, lambda d: image_loaded(d, image), "step 3's screenshot")
    assert driver.execute_script("return arguments[0].naturalWidth", image) == SCREEN[0] // 2
    x, y = pointer_of(STEP)
    fx, fy = mark_fraction(driver, figure)
    assert (fx, fy) == (pytest.approx(x / SCREEN[0], abs=0.01), pytest.approx(y / SCREEN[1], abs=0.01))


def open_task(driver: WebDriver, sample: SampleRun) -> str:
    attempt = next(a for a in sample.attempts if a.outcome == "pass" and a.steps >= STEP)
    driver.find_element(CSS, f'#tasks a[title="{attempt.key}"]').click()
    wait_for(driver, lambda d: attempt.task_id in d.find_element(CSS, "h1").text, "the task page")
    return attempt.key


def check_compare(driver: WebDriver) -> None:
    """Disagreeing tasks first; one task's steps side by side, screenshots loaded on both sides."""
    wait_for(driver, lambda d: count_text(d, "pairs"), "the compare table")
    verdicts = [row.get_attribute("data-verdict") for row in visible_rows(driver, "pairs")]
    assert "disagree" in verdicts and "agree" in verdicts
    assert verdicts[:verdicts.count("disagree")] == ["disagree"] * verdicts.count("disagree")
    driver.find_element(CSS, "#pairs tbody tr a").click()
    pairs = wait_for(driver, lambda d: d.find_elements(CSS, ".pair-row"), "the steps side by side")
    assert len(pairs) >= 2
    images = pairs[1].find_elements(CSS, "figure.shot img")
    assert len(images) == 2, "step 2 of both runs"
    for image in images:
        wait_for(driver, lambda d, image=image: image_loaded(d, image), "both runs' screenshots")
    headings = [h.text for h in driver.find_elements(CSS, ".side-by-side > .col h3")]
    assert headings[0].startswith("view-a") and headings[1].startswith("view-b")


def test_the_served_viewer(driver: WebDriver, served: Served, sample: SampleRun) -> None:
    check_run_page(driver, served.url + "/", sample)
    key = open_task(driver, sample)
    check_step(driver, sample, key)
    driver.get(served.url + "/")
    driver.find_element(CSS, ".compare-link a").click()
    check_compare(driver)


def test_the_filter_stays_in_the_address(driver: WebDriver, served: Served, sample: SampleRun) -> None:
    driver.get(served.url + "/")
    wait_for(driver, lambda d: count_text(d, "tasks"), "the table")
    Select(driver.find_element(CSS, "select[name=status]")).select_by_value("evaluator_error")
    assert "status=evaluator_error" in driver.current_url
    driver.refresh()
    wait_for(driver, lambda d: count_text(d, "tasks"), "the table after reload")
    assert {row.get_attribute("data-status") for row in visible_rows(driver, "tasks")} == {"evaluator_error"}


def test_the_static_export_from_disk(driver: WebDriver, sample: SampleRun, other_sample: SampleRun,
                                     tmp_path: Path) -> None:
    out = export_of(sample, other_sample, tmp_path / "site")
    check_run_page(driver, (out / "index.html").as_uri(), sample)
    key = open_task(driver, sample)
    assert driver.current_url == (out / "tasks" / f"{key}.html").as_uri()
    check_step(driver, sample, key)
    driver.get((out / "compare.html").as_uri())
    check_compare(driver)
