"""The Harbor venv (`make harbor-venv`) as the tests marked `harbor` use it: Harbor's own code reading what hcu
wrote, as a separate program (Harbor needs Python >= 3.12; hcu's venv may be older)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson

from hcu import REPO_ROOT

CHECK = Path(__file__).with_name("harbor_check.py")
CHECK_TIMEOUT_SEC = 300


def harbor_python() -> Path:
    """The Harbor venv's interpreter: $HCU_HARBOR_PYTHON (the Makefile exports it), else .venv-harbor here."""
    configured = os.environ.get("HCU_HARBOR_PYTHON")
    path = Path(configured) if configured else REPO_ROOT / ".venv-harbor" / "bin" / "python"
    assert path.is_file(), f"no Harbor venv at {path}: `make harbor-venv` builds it (needs CPython >= 3.12)"
    return path


def harbor_reads(command: str, *paths: Path) -> Any:
    """What Harbor's code made of `paths` (tests/harbor/harbor_check.py's JSON)."""
    proc = subprocess.run([str(harbor_python()), str(CHECK), command, *map(str, paths)], capture_output=True,
                          timeout=CHECK_TIMEOUT_SEC, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    return orjson.loads(proc.stdout)
