"""The shape of the code, kept: no import cycle, short files and functions, a small ``ls memory``.

import-linter (``make lint``) holds the layers one-way; these checks add what it does not
see. Every ``import`` and ``from ... import`` of the project's own modules counts, those
inside functions included: a cycle hidden by a function-level import is still a cycle.
"""

from __future__ import annotations

import ast
import re
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


# --- the same function rule over static/js ------------------------------------------------
# No JS parser is installed, so a small scanner finds function bodies: it skips strings,
# template literals, comments and regular expressions, and counts a body from the bracket
# that opens it (a declaration's or a method's ``) {``, an arrow's ``=> {`` or ``=> (``) to
# the one that closes it. ``if (...) {`` and the other statements are not functions.

WORDS_BEFORE_AN_EXPRESSION = {
    "return",
    "typeof",
    "case",
    "in",
    "of",
    "delete",
    "void",
    "throw",
    "new",
}
KEYWORDS_NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "with"}
IDENT = re.compile(r"[A-Za-z_$][\w$]*$")


def is_operand(token):
    """A "/" after this token divides; after anything else it opens a regular expression."""
    if token in (")", "]", "str", "regex"):
        return True
    return bool(re.fullmatch(r"[\w$]+", token)) and token not in WORDS_BEFORE_AN_EXPRESSION


def js_tokens(text):
    """(kind, value, line) for the tokens that matter: brackets, "=>", words; strings,
    template literals, comments and regular expressions skipped (their brackets do not count)."""
    i, line, n = 0, 1, len(text)
    prev = ""  # the last significant token, to tell a regex from a division
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch.isspace():
            i += 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif ch in "\"'`":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            # A template's ${...} may hold braces; they balance, so skipping them is safe.
            line += text.count("\n", i, j)
            i = j + 1
            prev = "str"
        elif ch == "/" and not is_operand(prev):
            j = i + 1
            in_class = False
            while j < n and (text[j] != "/" or in_class) and text[j] != "\n":
                if text[j] == "\\":
                    j += 1
                elif text[j] == "[":
                    in_class = True
                elif text[j] == "]":
                    in_class = False
                j += 1
            i = j + 1
            prev = "regex"
        elif text.startswith("=>", i):
            yield ("=>", "=>", line)
            prev = "=>"
            i += 2
        elif ch in "(){}[]":
            yield (ch, ch, line)
            prev = ch
            i += 1
        elif ch.isalnum() or ch in "_$":
            m = re.compile(r"[\w$]+").match(text, i)
            yield ("word", m.group(), line)
            prev = m.group()
            i = m.end()
        else:
            prev = ch
            i += 1


def js_function_lengths(text):
    """[(name, first line, lines)] for every function body in a script: a declaration's or a
    method's braces, an arrow's braces or parenthesized expression. A function's lines include
    those of the functions inside it, as the Python rule counts them."""
    found = []
    stack = []  # (bracket, name or None when not a function, first line)
    prev = prev_word = None  # the last token, the last word
    closed_owner = None  # the word before the "(" that the last ")" closed
    arrow_owner = None  # the name of the arrow function whose "=>" came last
    for kind, value, line in js_tokens(text):
        if kind in ("(", "{", "["):
            name = None
            if kind == "{" and prev == "=>":
                name = arrow_owner
            elif kind == "{" and prev == ")" and closed_owner not in KEYWORDS_NOT_FUNCTIONS:
                name = closed_owner or "function"
            elif kind == "(" and prev == "=>":
                name = arrow_owner
            owner = prev_word if prev == "word" else None
            stack.append((kind, name, line, owner))
        elif kind in (")", "}", "]"):
            if not stack:
                raise ValueError(f"line {line}: {value} closes nothing (the scanner misread)")
            opened, name, first, owner = stack.pop()
            if name is not None:
                found.append((name, first, line - first + 1))
            if kind == ")":
                closed_owner = owner
        elif kind == "=>":
            arrow_owner = (closed_owner if prev == ")" else prev_word) or "arrow"
        if kind == "word":
            prev_word = value
        prev = kind
    if stack:
        raise ValueError(f"line {stack[-1][2]}: {stack[-1][0]} never closed (the scanner misread)")
    return found


def test_no_script_function_is_longer_than_the_limit():
    long = {
        f"static/js/{path.name}:{name}:{first}": lines
        for path in sorted((ROOT / "static" / "js").glob("*.js"))
        for name, first, lines in js_function_lengths(path.read_text())
        if lines > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_the_script_function_checker_finds_a_long_function():
    """The check above can fail: a long factory, its methods and arrows are measured, and
    braces in strings, templates, regular expressions and comments do not count."""
    body = "\n".join(f"  const v{i} = {i};" for i in range(85))
    text = (
        "// a comment with { a brace\n"
        "export function createLong({ root }) {\n"
        f"{body}\n"
        '  const s = "}" + `${root} }` + /[{]/.source;\n'
        "  if (root) {\n    root.x = 1;\n  }\n"
        "  const api = {\n    render(list) {\n      return list;\n    },\n"
        "    arrow: () => (\n      1\n    ),\n  };\n"
        "  return api;\n"
        "}\n"
    )
    found = {name: lines for name, _, lines in js_function_lengths(text)}
    assert found["createLong"] == 85 + 15
    assert found["render"] == 3
    assert found["arrow"] == 3
    assert "if" not in found
    with pytest.raises(ValueError):  # a misread file fails loudly, never passes unmeasured
        js_function_lengths("function f() {\n  return 1;\n")
