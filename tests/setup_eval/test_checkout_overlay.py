"""scripts/install-osworld-v2.py against the installed desktop_env laid out as a checkout."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from hcu import REPO_ROOT

INSTALLER = REPO_ROOT / "scripts" / "install-osworld-v2.py"
PATCHED = (
    "desktop_env/controllers/setup.py",
    "desktop_env/evaluators/getters/file.py",
    "desktop_env/evaluators/getters/chrome.py",
)
HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/os/t1/gold.txt"


def install(checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(INSTALLER), str(checkout)], capture_output=True, text=True, timeout=60
    )


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_installs_the_edits_and_the_shim(desktop_env_checkout: Path) -> None:
    done = install(desktop_env_checkout)
    assert done.returncode == 0, done.stderr
    assert "overlay installed" in done.stdout
    setup = (desktop_env_checkout / PATCHED[0]).read_text()
    assert "from desktop_env import hcu_overlay  # hcu-overlay" in setup
    assert "hcu_overlay.prefill_download(url, cache_path)" in setup
    assert "hcu_overlay.prefill_download(db_url, cache_path)" in setup
    assert "p.chromium.connect_over_cdp(" not in setup
    chrome = (desktop_env_checkout / PATCHED[2]).read_text()
    assert chrome.count("hcu_overlay.connect_over_cdp(p.chromium, remote_debugging_url)") == 17
    assert "hcu_overlay.prefill_download(p, _path)" in (desktop_env_checkout / PATCHED[1]).read_text()
    assert (desktop_env_checkout / "desktop_env" / "hcu_overlay.py").is_file()
    for rel in PATCHED:  # every patched module still compiles
        compile((desktop_env_checkout / rel).read_text(), rel, "exec")


def test_second_run_changes_nothing(desktop_env_checkout: Path) -> None:
    assert install(desktop_env_checkout).returncode == 0
    before = tree_state(desktop_env_checkout)
    again = install(desktop_env_checkout)
    assert again.returncode == 0 and "already installed" in again.stdout
    assert tree_state(desktop_env_checkout) == before


def test_reinstalls_after_the_checkout_is_replaced(desktop_env_checkout: Path, tmp_path: Path) -> None:
    pristine = {rel: (desktop_env_checkout / rel).read_text() for rel in PATCHED}
    assert install(desktop_env_checkout).returncode == 0
    patched = {rel: (desktop_env_checkout / rel).read_text() for rel in PATCHED}
    for rel, text in pristine.items():  # e.g. `git checkout .` in the checkout: state dir stays behind
        (desktop_env_checkout / rel).write_text(text)
    redo = install(desktop_env_checkout)
    assert redo.returncode == 0 and "overlay installed" in redo.stdout
    assert {rel: (desktop_env_checkout / rel).read_text() for rel in PATCHED} == patched


def test_refuses_a_checkout_it_does_not_recognise_and_writes_nothing(desktop_env_checkout: Path) -> None:
    setup = desktop_env_checkout / PATCHED[0]
    setup.write_text(setup.read_text().replace("            if not url or not path:\n", "", 1))
    before = tree_state(desktop_env_checkout)
    refused = install(desktop_env_checkout)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "refusing" in refused.stderr
    expected = "desktop_env/controllers/setup.py: expected 'if not url or not path:' once"
    assert expected in refused.stderr
    assert tree_state(desktop_env_checkout) == before


def test_refuses_hcu_edits_it_has_no_record_of(desktop_env_checkout: Path) -> None:
    assert install(desktop_env_checkout).returncode == 0
    chrome = desktop_env_checkout / PATCHED[2]
    chrome.write_text(chrome.read_text() + "\n# local change\n")  # patched file edited by hand afterwards
    refused = install(desktop_env_checkout)
    assert refused.returncode == 2 and "has no record of" in refused.stderr


def test_refuses_a_folder_that_is_not_a_checkout(tmp_path: Path) -> None:
    refused = install(tmp_path)
    assert refused.returncode == 2 and "not an OSWorld checkout" in refused.stderr


PATCHED_GETTER = """
import sys
sys.path.insert(0, sys.argv[1])
import desktop_env
assert desktop_env.__file__.startswith(sys.argv[1]), desktop_env.__file__
from desktop_env.evaluators.getters import get_cloud_file

class Env:
    cache_dir = sys.argv[2]

path = get_cloud_file(Env(), {"path": sys.argv[3], "dest": "gold.txt"})
print(open(path).read())
"""


def test_patched_checkout_reads_cloud_files_from_the_asset_cache(
    desktop_env_checkout: Path, evaluator_python: Path, tmp_path: Path
) -> None:
    from hcu.osworld.osworld_bridge.assets import cache_path

    assert install(desktop_env_checkout).returncode == 0
    assets = tmp_path / "assets"
    cached = cache_path(assets, HF)
    cached.parent.mkdir(parents=True)
    cached.write_text("gold answer")
    (tmp_path / "task-cache").mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HCU_ASSET_CACHE=str(assets), HCU_OFFLINE_ASSETS="1")
    out = subprocess.run(
        [str(evaluator_python), "-c", PATCHED_GETTER, str(desktop_env_checkout), str(tmp_path / "task-cache"), HF],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "gold answer"  # offline and never fetched: from the asset cache


CDP_CONNECT = """
import sys
from playwright.sync_api import Error, sync_playwright
from hcu.defaults import RETRIES
from hcu.osworld.osworld_bridge.checkout_overlay import connect_over_cdp

with sync_playwright() as p:
    try:
        connect_over_cdp(p.chromium, sys.argv[1], backoff=RETRIES.chrome_cdp.model_copy(update={"tries": 3}))
    except Error as exc:
        print("gave up:", "connect_over_cdp" in str(exc))
"""


def test_cdp_connect_retries_with_bounded_backoff(asset_server, evaluator_python: Path) -> None:
    """Run where the overlay runs: in an OSWorld interpreter (Playwright is OSWorld's dependency, not hcu's)."""
    out = subprocess.run([str(evaluator_python), "-c", CDP_CONNECT, asset_server.url], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert out.stdout.strip() == "gave up: True", out.stderr[-2000:]
    assert len(asset_server.requests) == 3  # one /json/version probe per attempt, then it gives up
