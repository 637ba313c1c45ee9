"""setup_canary end to end on the test desktop, with real OSWorld `os` tasks and OSWorld's own code."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import docker
import orjson
import pytest

from hcu import REPO_ROOT
from hcu.osworld.osworld_bridge.assets import cache_path
from tests.official_tasks import OFFICIAL_TASKS, official_task

from .conftest import TEST_DESKTOP_IMAGE

PHOTOS_TASK = "23393935-50c7-4a86-aeea-2b78fd089c5c"  # five Hugging Face downloads, then check_moved_jpgs


def canary(
    result_dir: Path, task_id: str, *extra: str, tasks_dir: Path, env: dict[str, str] | None = None
) -> tuple[int, dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--benchmark-version", "v1", "--task-id", task_id,
         "--tasks-dir", str(tasks_dir), "--test-desktop", TEST_DESKTOP_IMAGE, "--result-dir", str(result_dir),
         "--run-id", canary_run_id(result_dir), *extra],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=env,
    )
    report_path = result_dir / "report.json"
    assert report_path.is_file(), f"no report.json; stderr: {done.stderr[-2000:]}"
    return done.returncode, orjson.loads(report_path.read_bytes()), done.stderr


def canary_run_id(result_dir: Path) -> str:
    """The run id a test gives the canary writing into `result_dir`: its own, so that tests of the same task on
    other workers do not see each other's guests."""
    return "canary-" + hashlib.sha256(str(result_dir).encode()).hexdigest()[:12]


def assert_guest_removed(result_dir: Path) -> None:
    """The canary that wrote into `result_dir` left no container."""
    client = docker.from_env(timeout=30)
    try:
        left = [c.name for c in client.containers.list(
            all=True, filters={"label": f"hcu.run_id={canary_run_id(result_dir)}"})]
    finally:
        client.close()
    assert left == [], f"the canary left its guest behind: {left}"


@pytest.mark.docker
@pytest.mark.parametrize(
    ("task_id", "metric_values"),
    [
        ("e0df059f-28a6-4169-924f-b9623e7184cc", [0.0]),  # exact_match on "Directory exists."
        ("bedcedc4-4d72-425e-ad62-21960b11fe0d", [0.0, 0.0]),  # exact_match or exact_match
    ],
)
def test_canary_passes_and_the_untouched_state_scores_zero(
    official_tasks: Path, tmp_path: Path, task_id: str, metric_values: list[float]
) -> None:
    code, report, stderr = canary(tmp_path / "r", task_id, "--run-evaluator", tasks_dir=official_tasks)
    assert code == 0 and report["status"] == "passed", report.get("error") or stderr
    assert [s["name"] for s in report["readiness"]][-1] == "sudo works"
    assert all(s["ok"] and s["duration_sec"] >= 0 for s in report["readiness"])
    task = official_task("os", task_id)
    assert [s["type"] for s in report["setup_steps"]] == [c["type"] for c in task["config"]]
    assert all(s["ok"] and s["error"] is None for s in report["setup_steps"])
    assert report["evaluator"]["score"] == 0.0
    assert report["evaluator"]["metric"] == task["evaluator"]["func"]
    assert report["evaluator"]["details"]["metric_values"] == metric_values
    assert_guest_removed(tmp_path / "r")


@pytest.mark.docker
def test_downloads_fill_the_cache_once_and_the_second_run_makes_no_request(
    official_tasks: Path, tmp_path: Path, asset_server, fake_jpeg: bytes
) -> None:
    """The task's Hugging Face URLs are served by a loopback mirror (`--asset-mirror`, the documented way to
    fill the cache from a copy of it); the cache is keyed by the original URLs."""
    task = official_task("os", PHOTOS_TASK)
    downloads = [step for step in task["config"] if step["type"] == "download"]
    urls = [f["url"] for step in downloads for f in step["parameters"]["files"]]
    assert len(urls) == 5
    for url in urls:
        asset_server.put(url, fake_jpeg)
    assets = tmp_path / "assets"
    flags = ("--asset-cache", str(assets), "--asset-mirror", asset_server.url, "--run-evaluator")

    code, report, stderr = canary(tmp_path / "first", PHOTOS_TASK, *flags, tasks_dir=official_tasks)
    assert code == 0 and report["status"] == "passed", report.get("error") or stderr
    assert len(asset_server.requests) == 5
    assert all(cache_path(assets, url).read_bytes() == fake_jpeg for url in urls)
    assert report["evaluator"]["score"] == 0.0  # check_moved_jpgs: cpjpg is still empty

    code, report, stderr = canary(tmp_path / "second", PHOTOS_TASK, *flags, tasks_dir=official_tasks)
    assert code == 0 and report["status"] == "passed", report.get("error") or stderr
    assert len(asset_server.requests) == 5, "the second run downloaded again"


@pytest.mark.docker
def test_offline_assets_with_an_empty_cache_fail_with_one_line(
    official_tasks: Path, tmp_path: Path, asset_server, fake_jpeg: bytes
) -> None:
    task = official_task("os", PHOTOS_TASK)
    first_download = next(step for step in task["config"] if step["type"] == "download")
    first_url = first_download["parameters"]["files"][0]["url"]
    asset_server.put(first_url, fake_jpeg)
    assets = tmp_path / "empty-cache"
    code, report, stderr = canary(
        tmp_path / "r", PHOTOS_TASK, "--offline-assets", "--asset-cache", str(assets),
        "--asset-mirror", asset_server.url, tasks_dir=official_tasks,
    )
    assert code == 1 and report["status"] == "failed"
    assert report["failure_classification"] == "configuration"  # an offline asset miss repeats on every attempt
    failed = report["setup_steps"][-1]
    assert (failed["index"], failed["type"], failed["ok"]) == (3, "download", False)
    assert failed["error"] == (
        f"asset {first_url} is not in the asset cache at {cache_path(assets, first_url)} "
        "(offline_assets forbids downloading)"
    )
    assert all(s["ok"] for s in report["setup_steps"][:-1])
    assert "\n" not in report["error"] and first_url in report["error"]
    assert asset_server.requests == []
    assert_guest_removed(tmp_path / "r")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--test-desktop", "--result-dir", "r"], "--task-id"),
        (["--benchmark-version", "v3", "--task-id", "x", "--test-desktop", "--result-dir", "r"],
         "--benchmark-version: Input should be 'v1' or 'v2'"),
        (["--benchmark-version", "v1", "--task-id", "x", "--result-dir", "r"],
         "--guest-image: expected a qcow2 path, or the test desktop"),
        (["--benchmark-version", "v1", "--task-id", "x", "--guest-image", "/nonexistent.qcow2",
          "--result-dir", "r"], "--guest-image: /nonexistent.qcow2 is not a file"),
        (["--benchmark-version", "v1", "--task-id", "x", "--test-desktop", "--volume-size", "0",
          "--result-dir", "r"], "--volume-size: Input should be greater than or equal to 1"),
        (["--benchmark-version", "v1", "--task-id", "no-such-task", "--test-desktop", "--tasks-dir",
          str(OFFICIAL_TASKS), "--result-dir", "r"], "task no-such-task not found"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path: Path, argv: list[str], expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", *argv],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    if (tmp_path / "r").exists():  # only a task that does not load gets as far as a report, which says so
        report = orjson.loads((tmp_path / "r" / "report.json").read_bytes())
        assert (report["failure_classification"], [p["name"] for p in report["phases"]]) == (
            "configuration", ["load", "cleanup"])


@pytest.mark.docker
def test_sigterm_while_the_guest_boots_removes_it_and_reports_interrupted(
    official_tasks: Path, tmp_path: Path
) -> None:
    import signal
    import time

    task_id = "f9be0997-4b7c-45c5-b05c-4612b44a6118"
    result_dir = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--benchmark-version", "v1", "--task-id", task_id,
         "--tasks-dir", str(official_tasks), "--test-desktop", TEST_DESKTOP_IMAGE, "--result-dir",
         str(result_dir), "--run-id", canary_run_id(result_dir)],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    client = docker.from_env(timeout=30)
    try:
        deadline = time.monotonic() + 60
        while not client.containers.list(all=True, filters={"label": f"hcu.task_id={task_id}"}):
            assert proc.poll() is None and time.monotonic() < deadline, "the canary never created its guest"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
    finally:
        client.close()
        if proc.poll() is None:
            proc.kill()
    report = orjson.loads((result_dir / "report.json").read_bytes())
    assert (report["status"], report["failure_classification"]) == ("failed", "interrupted")
    assert_guest_removed(result_dir)


@pytest.mark.docker
def test_a_checkout_with_the_overlay_installed_runs_setup_from_the_asset_cache(
    official_tasks: Path, tmp_path: Path, desktop_env_checkout: Path, fake_jpeg: bytes
) -> None:
    import os

    installed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "install-osworld-v2.py"), str(desktop_env_checkout)],
        capture_output=True, text=True, timeout=60,
    )
    assert installed.returncode == 0, installed.stderr
    task = official_task("os", PHOTOS_TASK)
    assets = tmp_path / "assets"
    for step in task["config"]:
        for f in step["parameters"].get("files", []):
            target = cache_path(assets, f["url"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fake_jpeg)
    env = dict(os.environ, OSWORLD_V2_ROOT=str(desktop_env_checkout))  # the reference's variable, as its README says
    code, report, stderr = canary(
        tmp_path / "r", PHOTOS_TASK, "--offline-assets", "--asset-cache", str(assets), "--run-evaluator",
        tasks_dir=official_tasks, env=env,
    )
    assert code == 0 and report["status"] == "passed", report.get("error") or stderr
    assert report["desktop_env"] == str(desktop_env_checkout.resolve() / "desktop_env")
    assert report["evaluator"]["score"] == 0.0


V2_TASKS = Path(__file__).resolve().parent / "v2_tasks"


@pytest.mark.docker
def test_a_v2_task_class_canary_runs_its_setup_and_scores_the_untouched_state(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hcu.osworld.setup_canary", "--benchmark-version", "v2", "--task-id", "901",
         "--tasks-dir", str(V2_TASKS), "--test-desktop", TEST_DESKTOP_IMAGE, "--result-dir", str(tmp_path / "r"),
         "--run-id", canary_run_id(tmp_path / "r"), "--run-evaluator"],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )
    report = orjson.loads((tmp_path / "r" / "report.json").read_bytes())
    assert done.returncode == 0 and report["status"] == "passed", report.get("error") or done.stderr[-2000:]
    assert [(s["type"], s["ok"]) for s in report["setup_steps"]] == [("task_class.setup", True)]
    assert report["evaluator"]["metric"] == "task_class.evaluate"
    assert report["evaluator"]["score"] == 0.0 and report["evaluator"]["details"]["task_result"]["lines"] is None
    assert report["osworld_python"].endswith(".venv-osworld/bin/python")
    assert_guest_removed(tmp_path / "r")
