"""The gateway's modules form no import cycle, type-checking imports included, and each imports on its own."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

from hcu import REPO_ROOT

PACKAGE = REPO_ROOT / "hcu" / "gateway"


def gateway_imports(path: Path) -> set[str]:
    """The hcu.gateway modules `path` imports anywhere (inside `if TYPE_CHECKING:` too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n.removeprefix("hcu.gateway.") for n in names if n.startswith("hcu.gateway.")}
    return found & {p.stem for p in PACKAGE.glob("*.py")}


def test_no_import_cycle_in_the_gateway():
    graph = {p.stem: gateway_imports(p) - {p.stem} for p in PACKAGE.glob("*.py")}
    assert len(graph) > 20
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert set(order) == set(graph)


def test_each_gateway_module_imports_alone():
    modules = sorted(f"hcu.gateway.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    procs = {m: subprocess.Popen([sys.executable, "-c", f"import {m}"], cwd=REPO_ROOT, stderr=subprocess.PIPE)
             for m in modules}
    failed = {m: p.communicate(timeout=120)[1].decode()[-300:] for m, p in procs.items() if p.wait(timeout=120)}
    assert failed == {}
