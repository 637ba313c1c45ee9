"""The one-file build: reproducible, both CPython ABIs inside, skipped when its inputs are unchanged."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest
from cu_desktop import build_artifact

from hcu import REPO_ROOT


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(out: Path) -> str:
    proc = subprocess.run(["bash", str(REPO_ROOT / "scripts/build-computer-use.sh"), str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.network
@pytest.mark.artifacts
def test_rebuild_is_byte_identical_and_carries_both_abis(tmp_path: Path) -> None:
    reference = build_artifact()
    fresh = tmp_path / "computer-use"
    printed = build(fresh)
    assert sha256(fresh) in printed, "the build prints the artifact's sha256"
    assert sha256(fresh) == sha256(reference), "same inputs gave a different file"
    assert "up to date" in build(fresh)
    assert fresh.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    names = zipfile.ZipFile(fresh).namelist()
    for abi in ("cpython-310-x86_64-linux-gnu", "cpython-311-x86_64-linux-gnu"):
        assert any(name.startswith("site-packages/pydantic_core/") and abi in name for name in names), abi
        assert any(name.startswith("site-packages/PIL/") and abi in name for name in names), abi
    assert "site-packages/hcu/computer_use/server.py" in names
