"""Debian's headless Chromium driven by Selenium through Debian's chromedriver (no browser download), with
waits on conditions only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000")
WAIT_SEC = 30
T = TypeVar("T")


def chromium(profile: Path) -> Iterator[WebDriver]:
    for path in (CHROMIUM, CHROMEDRIVER):
        assert path.is_file(), f"{path} is missing: install chromium and chromium-driver (scripts/setup-host.sh)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], T], what: str) -> T:
    """Until `condition` holds; an element the page replaced while it was read (stale) is read again."""
    return WebDriverWait(driver, WAIT_SEC, ignored_exceptions=[StaleElementReferenceException]).until(
        condition, message=f"waited {WAIT_SEC} s for {what}")


def visible_rows(driver: WebDriver, table_id: str) -> list[WebElement]:
    return [row for row in driver.find_elements("css selector", f"#{table_id} tbody tr") if row.is_displayed()]


def image_loaded(driver: WebDriver, image: WebElement) -> bool:
    """The image was fetched and decoded (a broken or blocked one has no natural width)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)
    return bool(driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", image))


def mark_fraction(driver: WebDriver, figure: WebElement) -> tuple[float, float]:
    """Where the click mark's centre sits on its screenshot, as fractions of the image's shown size (borders
    excluded)."""
    return tuple(driver.execute_script(
        "const e = arguments[0].querySelector('img'), r = e.getBoundingClientRect();"
        "const img = {left: r.left + e.clientLeft, top: r.top + e.clientTop, width: e.clientWidth,"
        " height: e.clientHeight};"
        "const m = arguments[0].querySelector('.mark').getBoundingClientRect();"
        "return [(m.left + m.width / 2 - img.left) / img.width, (m.top + m.height / 2 - img.top) / img.height];",
        figure))
