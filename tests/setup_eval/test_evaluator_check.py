"""python -m hcu.osworld.evaluator_check on the 369 official V1 tasks: in the evaluator venv every metric and
getter loads except the three desktop-env 1.0.2 lacks; an interpreter without OSWorld's dependencies is shown
with the modules it lacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hcu import REPO_ROOT
from tests.official_tasks import OFFICIAL_TASKS


def evaluator_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hcu.osworld.evaluator_check", "--tasks-dir", str(OFFICIAL_TASKS),
                           *args], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)


def test_366_of_369_official_tasks_load_in_the_evaluator_venv(evaluator_python: Path) -> None:
    done = evaluator_check()
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "evaluator loads for 366/369 tasks" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:1].isalpha() and
            len(line.split()) == 3 and line.split()[1].isdigit()}
    assert rows["vlc"] == ["17", "16"] and rows["chrome"] == ["46", "45"] and rows["multi_apps"] == ["101", "100"]
    assert rows["libreoffice_impress"] == ["47", "47"] and rows["total"] == ["369", "366"]
    for name, task in (("check_play_and_exit", "vlc/5ac2891a"), ("get_chrome_appearance_mode_ui", "chrome/93eabf48"),
                       ("check_structure_sim_with_threshold", "multi_apps/e8172110")):
        assert f"'{name}' is not in desktop-env 1.0.2" in out and f"(needed by {task})" in out
    assert "missing modules: none" in out
    assert str(evaluator_python) in out


def test_an_interpreter_without_osworlds_dependencies_shows_what_it_lacks(
    desktop_env_checkout: Path, tmp_path: Path
) -> None:
    """hcu's own venv, pointed at a checkout of OSWorld's code, has none of OSWorld's evaluator dependencies."""
    index = tmp_path / "index.json"
    index.write_text('{"os": ["e0df059f-28a6-4169-924f-b9623e7184cc"], '
                     '"vlc": ["5ac2891a-eacd-4954-b339-98abba077adb"]}')
    env = {**os.environ, "OSWORLD_V2_ROOT": str(desktop_env_checkout)}
    done = evaluator_check("--index", str(index), "--osworld-python", sys.executable, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "evaluator loads for 0/2 tasks" in done.stdout
    missing = next(line for line in done.stdout.splitlines() if line.startswith("missing modules: "))
    assert {"bs4", "easyocr", "pptx"} <= set(missing.removeprefix("missing modules: ").split(", "))
    assert "OSWorld's evaluator packages do not import: ModuleNotFoundError" in done.stdout


def test_bad_flags_exit_2_with_one_line(tmp_path: Path) -> None:
    done = evaluator_check("--osworld-python", str(tmp_path / "nope"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--osworld-python:" in done.stderr
