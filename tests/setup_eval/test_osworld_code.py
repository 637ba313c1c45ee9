"""Locating desktop_env and importing only the getters/metrics a task names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hcu.osworld.osworld_bridge import code as osworld_code

LAZY_CHECK = """
import sys
from hcu.osworld.osworld_bridge import code as osworld_code
assert "desktop_env" not in sys.modules, "importing hcu.osworld must not import desktop_env"
osworld_code.module("controllers.setup")
for name in ("vm_command_line", "rule", "list_directory", "vm_file"):
    osworld_code.getter(name)
for name in ("exact_match", "check_include_exclude", "check_moved_jpgs"):
    osworld_code.metric(name)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "easyocr", "transformers", "cv2"))
metrics = sorted(m for m in sys.modules if m.startswith("desktop_env.evaluators.metrics."))
print(heavy, metrics)
"""


def test_only_the_defining_submodules_are_imported() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LAZY_CHECK], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    heavy, metrics = out.strip().split("] [")
    assert heavy == "["
    assert metrics == (
        "'desktop_env.evaluators.metrics.basic_os', 'desktop_env.evaluators.metrics.general', "
        "'desktop_env.evaluators.metrics.utils']"
    )


def test_names_resolve_through_package_reexports() -> None:
    # `get_url_path_parse` is re-exported from chrome.py by the package __init__, not defined under that name
    index = osworld_code._defining_submodules(osworld_code.desktop_env_dir() / "evaluators" / "getters")
    assert index["get_vm_command_line"] == "general"
    assert index["get_url_path_parse"] == "chrome"


def test_unknown_names_fail_with_one_line() -> None:
    with pytest.raises(osworld_code.OSWorldCodeError, match="metric 'no_such_metric' is not in desktop_env"):
        osworld_code.metric("no_such_metric")
    with pytest.raises(osworld_code.OSWorldCodeError, match="getter 'get_no_such_getter'"):
        osworld_code.getter("no_such_getter")


def test_a_metric_whose_module_needs_a_missing_dependency_says_what_to_install() -> None:
    # metrics/docs.py imports easyocr (and through it torch), which the light install leaves out on purpose
    with pytest.raises(osworld_code.OSWorldCodeError, match="needs a module this interpreter lacks"):
        osworld_code.metric("compare_image_text")


def test_osworld_http_calls_get_a_timeout() -> None:
    setup = osworld_code.module("controllers.setup")
    assert setup.requests is osworld_code._BOUNDED_REQUESTS
    assert osworld_code.module("controllers.python").requests is osworld_code._BOUNDED_REQUESTS
    with pytest.raises(setup.requests.exceptions.ConnectionError):
        setup.requests.get("http://127.0.0.1:9/")  # closed port: fails fast instead of hanging


def test_call_with_deadline_gives_up_on_a_hung_call() -> None:
    import threading

    release = threading.Event()
    with pytest.raises(TimeoutError, match="hung step exceeded its 0.2 s deadline"):
        osworld_code.call_with_deadline(lambda: release.wait(10), 0.2, "hung step")
    release.set()
    assert osworld_code.call_with_deadline(lambda: 42, 5, "quick step") == 42


def test_missing_checkout_root_fails_with_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("OSWORLD_V2_ROOT", str(tmp_path))
    osworld_code.desktop_env_dir.cache_clear()
    try:
        with pytest.raises(osworld_code.OSWorldCodeError, match="has no desktop_env package; install"):
            osworld_code.desktop_env_dir()
    finally:
        osworld_code.desktop_env_dir.cache_clear()


def test_offline_lets_osworld_reach_only_the_guest_also_from_deadline_workers() -> None:
    setup = osworld_code.module("controllers.setup")
    url = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/x.sqlite"
    with osworld_code.offline("127.0.0.1"):
        with pytest.raises(setup.requests.ConnectionError, match=f"offline_assets forbids fetching {url}"):
            osworld_code.call_with_deadline(lambda: setup.requests.get(url), 5, "fetch")
        with pytest.raises(setup.requests.exceptions.ConnectionError, match="Connection refused|Max retries"):
            setup.requests.get("http://127.0.0.1:9/")  # the guest's host is allowed through
