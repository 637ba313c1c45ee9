"""Guest kinds: chosen once from the settings, each a class that answers what differs; nothing else in hcu asks
which kind a guest is. Pure logic."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import get_args

import orjson
import pytest

from hcu import REPO_ROOT
from hcu.defaults import GUEST
from hcu.osworld.guest.host import size_bytes
from hcu.osworld.guest.kinds import KINDS, GuestSpec, KindName, QemuGuest, TestDesktopGuest, kind_for
from hcu.osworld.run_config import ConfigError, load_config
from hcu.osworld.settings import GuestSettings

KIND_NAMES = set(get_args(KindName))


def test_every_kind_is_registered_under_the_name_meta_json_records() -> None:
    assert set(KINDS) == KIND_NAMES
    assert all(kind.name == name for name, kind in KINDS.items())


def test_the_settings_choose_the_kind_once(tmp_path: Path) -> None:
    desktop = GuestSettings(test_desktop=True, volume_size=64, client_password="pw")
    assert isinstance(kind_for(desktop), TestDesktopGuest)
    assert GuestSpec.for_settings(desktop).model_dump(include={"kind", "image"}) == {
        "kind": "test-desktop", "image": GUEST.test_desktop_image}
    qcow2 = tmp_path / "guest.qcow2"
    official = GuestSettings(guest_image=qcow2, volume_size=64, client_password="pw")
    assert isinstance(kind_for(official), QemuGuest)
    spec = GuestSpec.for_settings(official)
    assert (spec.kind, spec.image, spec.container_image) == ("qemu", str(qcow2), GUEST.qemu_docker_image)


@pytest.mark.parametrize("guest", [{}, {"test_desktop": True, "guest_image": "guest.qcow2"}],
                         ids=["neither", "both"])
def test_neither_or_both_guest_settings_is_one_line_naming_the_setting(tmp_path: Path, guest: dict) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps({"agent": "codex", "tasks": ["a"], "gateway": "http://127.0.0.1:9",
                                   "results_dir": str(tmp_path), **guest}))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert "guest_image: expected a qcow2 path, or the test desktop instead" in message and "\n" not in message
    flags = {"test_desktop": ["--test-desktop"], "guest_image": ["--guest-image", str(tmp_path / "g.qcow2")]}
    argv = [flag for key in guest for flag in flags[key]]
    done = subprocess.run([sys.executable, "-m", "hcu.osworld.run_task", "--task-id", "t", "--agent", "codex",
                           *argv], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "error: --guest-image: expected a qcow2 path, or the test desktop instead (exactly one of the two)")


def test_each_kind_sizes_its_memory_and_names_what_sized_it() -> None:
    qemu = GuestSpec(kind="qemu", image="guest.qcow2", ram_size="8G")
    desktop = GuestSpec(kind="test-desktop", image="hcu-test-desktop:latest", ram_size="64G")
    qemu_need = (8 * (1 << 30) + size_bytes(GUEST.memory_overhead), "ram_size 8G")
    assert qemu.guest_kind.memory_need(qemu.ram_size) == qemu_need
    desktop_need = (size_bytes(GUEST.test_desktop_memory), "the test desktop")
    assert desktop.guest_kind.memory_need(desktop.ram_size) == desktop_need


def _compares_a_kind_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and any(
        isinstance(side, ast.Constant) and side.value in KIND_NAMES for side in [node.left, *node.comparators])


def test_nothing_outside_the_kinds_branches_on_a_kind() -> None:
    """A new kind is a class in kinds.py, not a branch wherever kinds differ."""
    branches = [f"{path.relative_to(REPO_ROOT)}:{node.lineno}" for path in (REPO_ROOT / "hcu").rglob("*.py")
                for node in ast.walk(ast.parse(path.read_text())) if _compares_a_kind_name(node)]
    assert branches == []
    assert _compares_a_kind_name(ast.parse('spec.kind == "qemu"').body[0].value)  # type: ignore[attr-defined]
