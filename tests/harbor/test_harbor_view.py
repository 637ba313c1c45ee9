"""A run exported with `--format harbor` opened as a person would in Harbor's own viewer: `harbor view` on loopback
(telemetry off, an empty home: no account), driven in Debian's headless Chromium. The jobs page lists the run, its
page lists every attempt with its reward (a withheld one with its error, not 0), and a trial shows each step's
screenshot (loaded: natural width > 0) once its tool call is opened, and offers the recording."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from hcu.osworld.evidence.harbor_export import export_harbor_job
from tests.harbor.harbor_env import harbor_python
from tests.view.browser import chromium, image_loaded, wait_for
from tests.view.sample_run import Attempt, build_run

pytestmark = [pytest.mark.harbor, pytest.mark.browser]
ATTEMPTS = [Attempt("t-pass", "pass", steps=3), Attempt("t-fail", "fail", steps=2),
            Attempt("t-eval", "evaluator_error", steps=2)]
REWARD_CELLS = {"t-pass": "1.00", "t-fail": "0.00", "t-eval": "EvaluatorError"}
START_DEADLINE_SEC = 120
REQUEST_TIMEOUT_SEC = 5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_SEC) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`harbor view` serving the exported job; stopped by its pid."""
    root = tmp_path_factory.mktemp("harbor-view")
    run_dir = build_run(root, "hcu-view-run", ATTEMPTS).run_dir
    out = root / "jobs"
    export_harbor_job(run_dir, out)
    home = root / "home"
    home.mkdir()
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HARBOR_TELEMETRY": "0",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    harbor = harbor_python().with_name("harbor")
    log = root / "harbor-view.log"
    with log.open("wb") as sink:  # a file, not a pipe: nothing reads it while the server runs
        server = subprocess.Popen([str(harbor), "view", str(out), "--jobs", "--no-build", "--host", "127.0.0.1",
                                   "--port", str(port)], env=env, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_DEADLINE_SEC
        while not answers(f"{base}/api/health"):
            assert time.monotonic() < deadline, f"harbor view did not answer within {START_DEADLINE_SEC} s"
            try:
                server.wait(timeout=1)  # the pause between checks, cut short if the server exits
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError(f"harbor view exited: {log.read_text(errors='replace')[-3000:]}")
        yield base, run_dir
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    yield from chromium(tmp_path_factory.mktemp("chromium-profile"))


def body_text(driver: WebDriver) -> str:
    return driver.find_element("tag name", "body").text


def test_the_jobs_page_lists_the_run_and_its_page_every_attempt_with_its_reward(viewer, driver):
    base, _ = viewer
    driver.get(f"{base}/")
    wait_for(driver, lambda d: "hcu-view-run" in body_text(d), "the run in the jobs list")
    driver.get(f"{base}/jobs/hcu-view-run")
    rows = wait_for(driver, lambda d: [r.text for r in d.find_elements("css selector", "tbody tr")
                                       if r.text.split(" ")[0].split("\n")[0] in REWARD_CELLS] or None,
                    "the trials table")
    cells = {row.split("\n")[0].split(" ")[0]: row for row in rows}
    assert sorted(cells) == sorted(REWARD_CELLS)
    for trial, reward in REWARD_CELLS.items():
        assert reward in cells[trial], (trial, cells[trial])
    assert "0.00" not in cells["t-eval"], "a withheld attempt is an error, never a 0"


def test_a_trial_shows_each_steps_screenshot_and_offers_the_recording(viewer, driver):
    base, run_dir = viewer
    driver.get(f"{base}/jobs/hcu-view-run/trials/t-pass")
    calls = wait_for(driver, lambda d: [b for b in d.find_elements("css selector", "button")
                                        if b.text.startswith("mcp__computer-use__click")] or None, "the steps")
    assert len(calls) == 3
    for call in calls:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", call)
        call.click()
    shots = wait_for(driver, lambda d: [i for i in d.find_elements("css selector", "img")
                                        if "/files/agent/steps/" in (i.get_attribute("src") or "")][:3]
                     if len(d.find_elements("css selector", "img[src*='/files/agent/steps/']")) >= 3 else None,
                     "a screenshot under each opened step")
    for shot in shots:
        wait_for(driver, lambda d, shot=shot: image_loaded(d, shot), f"{shot.get_attribute('src')} to load")
    names = [shot.get_attribute("src").rsplit("/", 1)[1] for shot in shots]
    assert names == sorted(p.name for p in (run_dir / "tasks" / "t-pass" / "steps").iterdir())
    tab = next(b for b in driver.find_elements("css selector", "button") if b.text == "Recording")
    tab.click()
    video = wait_for(driver, lambda d: next(iter(d.find_elements("css selector", "video")), None), "the player")
    source = video.get_attribute("src")
    assert source.endswith("/api/jobs/hcu-view-run/trials/t-pass/recording/file")
    with urllib.request.urlopen(source, timeout=REQUEST_TIMEOUT_SEC) as response:
        assert response.headers["Content-Type"] == "video/mp4"
        assert response.read() == (run_dir / "tasks" / "t-pass" / "recording.mp4").read_bytes()
