"""The README's configuration table names every environment variable the code reads:
the settings and every module of the application (read through driftless/env.py's
readers or os.environ), and the local model's script."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READERS = {
    "env_str",
    "env_bool",
    "env_int",
    "env_float",
    "env_list",
    "secret_key_from_env_or_file",
    "mcp_servers_from_env",
    "getenv",
}
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]+):-")


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def python_reads(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        args: list[ast.AST] = []
        if isinstance(node, ast.Call):
            called = _name(node.func)
            is_environ_get = (
                called == "get" and _name(getattr(node.func, "value", None)) == "environ"
            )
            if called in READERS:  # the name first (two names: the MCP list and its file)
                args = node.args[: 2 if called == "mcp_servers_from_env" else 1]
            elif is_environ_get:
                args = node.args[:1]
        elif isinstance(node, ast.Subscript) and _name(node.value) == "environ":
            args = [node.slice]
        names |= {
            a.value
            for a in args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.isupper()
        }
    return names


def code_reads() -> set[str]:
    names: set[str] = set()
    for package in ("driftless", "memory", "chat"):
        for path in (ROOT / package).rglob("*.py"):
            names |= python_reads(path)
    names -= {"DJANGO_SETTINGS_MODULE"}  # Django's own, set by manage.py
    for script in (ROOT / "scripts").glob("*.sh"):
        names |= set(SHELL_READ.findall(script.read_text()))
    return names


def table_names() -> set[str]:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Configuration", 1)[1].split("\n### ", 1)[0]
    names: set[str] = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split(" | ")[0]))
    return names


def test_every_variable_the_code_reads_is_in_the_readme_table():
    missing = code_reads() - table_names()
    assert not missing, f"read by the code, not in the README's table: {sorted(missing)}"


def test_the_table_lists_nothing_the_code_does_not_read():
    makefile_only = {"HOST", "PORT", "WORKERS", "TEST_WORKERS", "DRIFT_DATA", "FILE"}
    stale = table_names() - code_reads() - makefile_only
    assert not stale, f"in the README's table, read by nothing: {sorted(stale)}"


def test_the_scanner_sees_a_read():
    assert "SECRET_KEY" in code_reads() and "DRIFTLESS_MCP_SERVERS_FILE" in code_reads()
