"""hcu installed into an OSWorld interpreter (`pip install -e` of this repository, as the reference's `$PY`
route asks): its dependencies resolve beside OSWorld's, and hcu's commands run from that interpreter with the
OSWorld process on the same one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hcu import REPO_ROOT
from tests.official_tasks import OFFICIAL_TASKS


@pytest.mark.network  # pip may fetch the build backend (setuptools) into its isolated build environment
def test_pip_install_e_into_the_evaluator_venv_works(evaluator_python: Path, tmp_path: Path) -> None:
    pip = [str(evaluator_python), "-m", "pip"]
    installed = subprocess.run([*pip, "install", "-q", "-e", str(REPO_ROOT)], capture_output=True, text=True,
                               timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH: hcu comes from the install
    where = subprocess.run([str(evaluator_python), "-c", "import hcu; print(hcu.REPO_ROOT)"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env=env)
    assert where.stdout.strip() == str(REPO_ROOT), where.stderr
    index = tmp_path / "index.json"
    index.write_text('{"os": ["e0df059f-28a6-4169-924f-b9623e7184cc"]}')
    done = subprocess.run(
        [str(evaluator_python), "-m", "hcu.osworld.evaluator_check", "--tasks-dir", str(OFFICIAL_TASKS),
         "--index", str(index), "--osworld-python", str(evaluator_python)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "evaluator loads for 1/1 tasks" in done.stdout


RESOLVE = """
from pathlib import Path
import hcu.osworld.osworld_bridge.process as process
process.EVALUATOR_VENV = Path("/nonexistent-evaluator-venv")
print(process.resolve_python(None))
"""


def test_without_the_evaluator_venv_an_interpreter_with_osworld_runs_it_itself(evaluator_python: Path) -> None:
    """The reference's route: hcu run by an OSWorld checkout's `$PY` uses that interpreter for OSWorld's code."""
    done = subprocess.run([str(evaluator_python), "-c", RESOLVE], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})
    assert done.stdout.strip() == str(evaluator_python), done.stderr
