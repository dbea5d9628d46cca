"""The source tree keeps the layout docs/architecture.md draws (issue 33): every import stays inside
what its folder may import, no import circle exists (imports inside functions count too: hiding an
import in a function does not remove the circle), no folder is a package waiting to be made, and
every command of `python -m stacks` is a package of stacks/tools."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacks.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = ("components", "stacks", "policy", "benchmarks", "provider")
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_ROW = re.compile(r"^\| `(?P<folder>[^`]+)` \| (?P<what>.+?) \| (?P<imports>.+?) \|$", re.MULTILINE)


def source_files() -> Iterator[Path]:
    yield ROOT / "__main__.py"
    for top in SOURCE_ROOTS:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            if "venv" not in path.parts and "__pycache__" not in path.parts:
                yield path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in source_files()}


def with_packages(module: str) -> set[str]:
    """`module` and every package above it: Python runs each package's `__init__` first."""
    parts = module.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts) + 1)} & MODULES.keys()


def imports_of(path: Path, *, packages: bool = True) -> set[str]:
    """The project's modules `path` imports, at any level (module, class or function body), and
    (`packages`) the packages whose `__init__` those imports run."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    found.add(full)
                elif node.module in MODULES:
                    found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
    if not packages:
        return found
    return set().union(*map(with_packages, found)) if found else set()


GRAPH = {name: imports_of(path) - with_packages(name) for name, path in MODULES.items()}
"""Module -> what importing it runs: for circles."""
EXPLICIT = {name: imports_of(path, packages=False) - {name} for name, path in MODULES.items()}
"""Module -> what its code names: for the table's may-import column."""


def architecture_rows() -> dict[str, set[str]]:
    """docs/architecture.md's layout table: folder -> the folders it may import."""
    rows = {}
    for match in _ROW.finditer(ARCHITECTURE.read_text()):
        rows[match["folder"]] = set(re.findall(r"`([^`]+)`", match["imports"]))
    return rows


ROWS = architecture_rows()


def row_of(path: Path) -> str | None:
    relative = path.relative_to(ROOT).as_posix()
    matches = [row for row in ROWS if relative == row or (row.endswith("/") and relative.startswith(row))]
    return max(matches, key=len) if matches else None


def test_the_table_is_read() -> None:
    # A table the regex no longer reads would make every other test here pass vacuously.
    assert {"components/vcenter/", "stacks/tools/", "stacks/cli.py", "__main__.py"} <= set(ROWS)


def test_every_source_file_belongs_to_a_row_of_the_table() -> None:
    homeless = sorted(str(p.relative_to(ROOT)) for p in MODULES.values() if row_of(p) is None)
    assert homeless == [], f"add a row for these to docs/architecture.md's layout table: {homeless}"


def test_every_row_of_the_table_exists() -> None:
    missing = sorted(row for row in ROWS if not (ROOT / row).exists())
    assert missing == [], f"docs/architecture.md names what the tree no longer has: {missing}"


def test_imports_stay_inside_what_each_folder_may_import() -> None:
    breaches = []
    for name, targets in EXPLICIT.items():
        own = row_of(MODULES[name])
        assert own is not None
        for target in sorted(targets):
            theirs = row_of(MODULES[target])
            if theirs != own and theirs not in ROWS[own]:
                breaches.append(f"{name} ({own}) imports {target} ({theirs})")
    assert breaches == []


def import_circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles = []
    counter = 0
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle() -> None:
    assert import_circles() == []


def test_the_circle_finder_finds_a_circle() -> None:
    # Guards the guard: a two-module circle added to the graph is found.
    GRAPH["components.vcenter.errors"].add("components.vcenter.tasks")
    GRAPH["components.vcenter.tasks"].add("components.vcenter.errors")
    try:
        circles = import_circles()
        assert any({"components.vcenter.errors", "components.vcenter.tasks"} <= set(c) for c in circles)
    finally:
        GRAPH["components.vcenter.errors"].discard("components.vcenter.tasks")
        GRAPH["components.vcenter.tasks"] = imports_of(MODULES["components.vcenter.tasks"]) - with_packages(
            "components.vcenter.tasks"
        )


def prefix_families(folder: Path) -> dict[str, list[str]]:
    names = [p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")]
    if folder.parts[-1:] and (ROOT / "tests") in folder.parents:
        names = [n.removeprefix("test_") for n in names]
    families = defaultdict(list)
    for name in names:
        if "_" in name:
            families[name.split("_")[0]].append(name)
    return {prefix: sorted(members) for prefix, members in families.items() if len(members) >= 3}


@pytest.mark.parametrize("top", SOURCE_ROOTS)
def test_no_folder_holds_three_files_sharing_a_name_prefix(top: str) -> None:
    folders = [p for p in (ROOT / top).rglob("*") if p.is_dir() and "__pycache__" not in p.parts and "venv" not in p.parts]
    found = {str(f.relative_to(ROOT)): fams for f in [ROOT / top, *folders] if (fams := prefix_families(f))}
    assert found == {}, f"a package waiting to be made: {found}"


def test_every_command_is_a_package_of_stacks_tools() -> None:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    commands = sorted(subparsers.choices)  # type: ignore[attr-defined]
    assert commands  # the parser was read
    for command in commands:
        package = ROOT / "stacks" / "tools" / command.replace("-", "_")  # retired-copies: retired_copies
        assert (package / "__init__.py").is_file(), f"`python -m stacks {command}` has no package {package}"
        assert "register" in (package / "__init__.py").read_text(), f"{package}/__init__.py does not expose register"
