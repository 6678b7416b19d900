"""The shape of the code, kept: no import cycle, short files and functions, a small ``ls memory``.

import-linter (``make lint``) holds the layers one-way; these checks add what it does not
see. Every ``import`` and ``from ... import`` of the project's own modules counts, those
inside functions included: a cycle hidden by a function-level import is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memory", "chat", "driftless", "bench")  # bench: run as python -m bench.NAME
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_MEMORY_ENTRIES = 12
DJANGO_FILES = {
    "__init__.py",
    "admin",  # a package: the organization scope and consolidation runs beside the rest
    "apps.py",
    "migrations",
    "models",  # a package: the durable facts beside the rest (memory/models/facts.py)
    "models.py",
    "tasks.py",
    "management",
}


def project_files() -> dict[str, Path]:
    """Module name -> file, for every module of the project's packages (not migrations)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from a import b``: the module a.b when there is one, else a itself.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = project_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_takes_part_in_an_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path):
    """The check above can fail: a function-level import back is found."""
    (tmp_path / "a.py").write_text("from b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import y\n")
    known = {"a", "b"}
    graph = {name: imported_modules(name, tmp_path / f"{name}.py", known) for name in known}
    assert cycles(graph) == [["a", "b"]]


def test_ls_memory_shows_the_architecture():
    entries = {path.name for path in (ROOT / "memory").iterdir() if path.name != "__pycache__"}
    assert len(entries - DJANGO_FILES) <= MAX_MEMORY_ENTRIES, sorted(entries - DJANGO_FILES)


def test_the_maps_name_every_room_of_ls_memory():
    """``memory/__init__.py`` and the README's "Where things are" name what ``ls memory`` shows."""
    entries = {
        path.name
        for path in (ROOT / "memory").iterdir()
        if path.name not in ("__pycache__", "__init__.py")
    }
    docstring = ast.get_docstring(ast.parse((ROOT / "memory" / "__init__.py").read_text()))
    readme = (ROOT / "README.md").read_text()
    readme_map = readme[readme.index("- `memory/` the domain") : readme.index("- `chat/`")]
    for text in (docstring, readme_map):
        named = {entry for entry in entries if f"``{entry}" in text or f"`{entry}" in text}
        assert entries - named == set()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_file_is_longer_than_the_limit(package):
    long = {
        str(path.relative_to(ROOT)): lines
        for path in project_files().values()
        if path.relative_to(ROOT).parts[0] == package
        and (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_longer_than_the_limit():
    long = {}
    for path in project_files().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}


def test_the_benches_set_up_through_one_path():
    """Run as ``python -m bench.NAME``: no bench edits ``sys.path``, and only bench/common.py
    calls ``django.setup()``."""
    found = [
        f"{path.relative_to(ROOT)}: {needle}"
        for path in sorted((ROOT / "bench").rglob("*.py"))
        for needle in ("sys.path.insert", "django.setup()")
        if needle in path.read_text() and path.name != "common.py"
    ]
    assert found == []
