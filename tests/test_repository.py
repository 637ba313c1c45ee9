"""The repository's own rules, checked: no import cycles in hcu and no loop among its rooms (lazy and type-checking
imports included), no citation of files outside the repository or of issue numbers, a README a newcomer reads in
five minutes, and one place per kind of knowledge (an agent CLI named only by its adapter, a provider's variables
only by its gateway)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hcu import REPO_ROOT
from hcu.gateway.descriptors import PROVIDERS
from hcu.osworld.agents import AGENT_NAMES, MANAGED_CONFIG

PACKAGE = REPO_ROOT / "hcu"
CITATION = re.compile(r"\.\./shared|OSWORLD\.md|ten-problems|DESIGN\.md|\bnotes/[a-z-]+\.md|\bissue \d+|\bissue #\d+")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(importer: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, relative ones resolved against the importer's package."""
    if node.level == 0:
        return node.module or ""
    package = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = absolute(name, path, node)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name] |= {target for target in targets if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_module_of_hcu_imports_back_what_imports_it() -> None:
    assert cycles(import_graph()) == []


def room(module: str) -> str:
    """The room a module lives in: a folder (or a single module) right under `hcu/` or `hcu/osworld/`."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["hcu", "osworld"] and len(parts) > 2 else parts[:2])


def room_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Rooms that reach one another through their imports (at module level, in a function or under TYPE_CHECKING),
    two rooms importing each other or a loop of any length: the strongly connected components of the rooms."""
    rooms: dict[str, set[str]] = {room(module): set() for module in graph}
    for module, targets in graph.items():
        rooms[room(module)] |= {room(target) for target in targets} - {room(module)}
    return cycles(rooms)


def test_no_loop_among_the_rooms_of_hcu() -> None:
    assert room_loops(import_graph()) == []


def test_a_loop_of_rooms_is_found_at_any_length() -> None:
    graph = {"hcu.osworld.attempt.runner": {"hcu.osworld.evidence.collect", "hcu.osworld.attempt.identity"},
             "hcu.osworld.evidence.collect": {"hcu.osworld.summary.rows"}, "hcu.osworld.summary.rows": set(),
             "hcu.osworld.attempt.identity": set(), "hcu.gateway.core": {"hcu.defaults"}, "hcu.defaults": set()}
    assert room_loops(graph) == []
    graph["hcu.osworld.summary.rows"].add("hcu.osworld.attempt.identity")
    assert room_loops(graph) == [["hcu.osworld.attempt", "hcu.osworld.evidence", "hcu.osworld.summary"]]
    graph["hcu.osworld.summary.rows"] = {"hcu.osworld.evidence.collect"}
    assert room_loops(graph) == [["hcu.osworld.evidence", "hcu.osworld.summary"]]


def test_a_cycle_is_found_where_there_is_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def drawn_floors(text: str) -> dict[str, int]:
    """The rooms of contributing.md's picture by floor: the block whose first line is `floor  rooms`."""
    block = text.split("```\nfloor  rooms\n", 1)[1].split("```", 1)[0]
    floors: dict[str, int] = {}
    for line in block.splitlines():
        floor, *paths = line.split()
        for path in paths:
            assert path not in floors, f"{path} is drawn twice"
            floors[path] = int(floor)
    return floors


def room_of_path(path: str) -> str:
    """`osworld/view/` -> hcu.osworld.view, `osworld/__init__.py` -> hcu.osworld (paths under hcu/)."""
    parts = ["hcu", *path.removesuffix("/").removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_contributing_md_draws_every_room_above_what_it_imports() -> None:
    floors = {room_of_path(path): floor for path, floor in
              drawn_floors((REPO_ROOT / "docs" / "contributing.md").read_text()).items()}
    graph = import_graph()
    assert sorted(floors) == sorted({room(module) for module in graph})
    upward = sorted({f"{room(a)} -> {room(b)}" for a, targets in graph.items() for b in targets
                     if room(a) != room(b) and floors[room(a)] <= floors[room(b)]})
    assert upward == [], "an import that does not run down the picture's floors"


def test_drawn_floors_read_a_room_per_path() -> None:
    text = "x\n```\nfloor  rooms\n  2   osworld/view/  demo/\n  1   osworld/__init__.py  defaults.py\n```\ny ```"
    assert drawn_floors(text) == {"osworld/view/": 2, "demo/": 2, "osworld/__init__.py": 1, "defaults.py": 1}
    assert [room_of_path(path) for path in drawn_floors(text)] == ["hcu.osworld.view", "hcu.demo", "hcu.osworld",
                                                                   "hcu.defaults"]


def reached(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """Every module that `start`'s modules import, directly or through others."""
    seen, todo = set(), list(start)
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_attempt_runner_reaches_no_stand_in() -> None:
    """The commands choose the asset source (hcu/osworld/stand_ins/asset_source.py) and hand it to the runner."""
    graph = import_graph()
    runner = {module for module in graph if room(module) == "hcu.osworld.attempt"}
    assert {room(module) for module in reached(graph, runner)} & {"hcu.osworld.stand_ins"} == set()


def test_reached_follows_imports_through_other_modules() -> None:
    assert reached({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}, {"a"}) == {"b", "c"}


def test_code_and_docs_cite_nothing_outside_the_repository() -> None:
    files = [*PACKAGE.rglob("*.py"), *(REPO_ROOT / "tests").rglob("*.py"), *(REPO_ROOT / "bench").glob("*.py"),
             *(REPO_ROOT / "docs").glob("*.md"), REPO_ROOT / "README.md"]
    cited = [f"{path.relative_to(REPO_ROOT)}:{n}" for path in files
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if CITATION.search(line) and path.name != "test_repository.py"]
    assert cited == []


def test_the_readme_is_a_front_page_and_its_links_lead_somewhere() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert links and [link for link in links if not (REPO_ROOT / link).exists()] == []


def files_naming(names: list[str], outside: Path, root: Path = PACKAGE) -> list[str]:
    """Python files under `root`, apart from those under `outside`, whose text (code, docstrings or comments) names
    one of `names` as a whole word."""
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                  if not path.is_relative_to(outside) and word.search(path.read_text()))


def test_only_its_adapter_names_an_agent_cli() -> None:
    """Settings, defaults, isolation, the manifest and the evidence read the agent registry instead."""
    assert files_naming([*AGENT_NAMES, *MANAGED_CONFIG], PACKAGE / "osworld" / "agents") == []


def test_only_the_gateway_names_a_provider_s_variables() -> None:
    """Node gateways, the stand-in, the run config, redaction and adapters read the provider descriptors."""
    variables = [name for p in PROVIDERS.values() for name in (*p.credential_env, p.base_env) if name]
    assert files_naming(variables, PACKAGE / "gateway") == []


def test_files_naming_finds_a_name_as_a_word_only(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    texts = {"word.py": "run('codex')", "comment.py": "# codex kills it", "prefix.py": "codex-like = codex_home",
             "agents/own.py": "NAME = 'codex'"}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    assert files_naming(["codex", "/etc/codex"], tmp_path / "agents", tmp_path) == ["comment.py", "word.py"]
