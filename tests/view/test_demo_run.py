"""A run directory the project really produced (the built-in demo, run once per session) opens in the viewer:
every task of its panel appears with the score summarize gave it, and a task page shows its phases and final
screens."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.demo_panel import EXPECTED_SCORE, DemoRun
from tests.view.browser import chromium, image_loaded, visible_rows, wait_for
from tests.view.conftest import serve

pytestmark = [pytest.mark.docker, pytest.mark.artifacts, pytest.mark.browser]
CSS = "css selector"


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    yield from chromium(tmp_path / "profile")


@pytest.mark.timeout(1500)
def test_the_demo_run_opens_with_its_scores(demo_run: DemoRun, driver: WebDriver) -> None:
    with (demo_run.run_dir / "summary" / "tasks.csv").open() as f:
        expected = {row["task_id"]: row["score"] for row in csv.DictReader(f)}
    assert len(expected) == 5
    with serve([str(demo_run.run_dir)]) as served:
        driver.get(served.url + "/")
        wait_for(driver, lambda d: len(visible_rows(d, "tasks")) == len(expected), "the demo's five tasks")
        shown = {row.get_attribute("data-task"): row.get_attribute("data-score")
                 for row in visible_rows(driver, "tasks")}
        assert {task: float(score) for task, score in shown.items()} == \
            {task: float(score) for task, score in expected.items()}
        cards = driver.find_element(CSS, ".cards").text
        assert f"{100 * EXPECTED_SCORE:.1f}%" in cards and "SCRIPTED MODEL" in driver.page_source
        solved = next(task for task, score in expected.items() if float(score) == 1.0)
        driver.find_element(CSS, f'#tasks a[title="{solved}"]').click()
        wait_for(driver, lambda d: solved in d.find_element(CSS, "h1").text, "the task page")
        phases = [row.text.split()[0] for row in driver.find_elements(CSS, ".phasebar ~ table tbody tr")]
        assert phases[:3] == ["load", "boot", "isolate"] and "evaluate" in phases
        finals = driver.find_elements(CSS, ".finals img")
        assert len(finals) == 2
        for image in finals:
            wait_for(driver, lambda d, image=image: image_loaded(d, image), "the final screenshots")
