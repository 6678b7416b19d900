"""Interfaces write only through memory.actions: what ``chat`` takes from memory.stores is
the reviewed reads listed in pyproject.toml's contract, name by name.

import-linter (``make lint``) sees modules, so it refuses any store module not listed
(``memory.stores.facts``, ``memory.stores.leases``, ...); this check sees the names, so a
write taken from a listed module (``append_notes`` from ``memory.stores.notes``) is
refused too.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "Interfaces write through memory.actions"

# (module of chat, store module) -> the names it may import: reads only.
READS = {
    ("chat.api.sessions", "memory.stores.messages"): {"topic_page", "usage_totals"},
    ("chat.views", "memory.stores.messages"): {
        "shown_session_title",
        "topic_page",
        "with_list_fields",
    },
    ("chat.views", "memory.stores.search"): {"SearchError", "marked_segments", "search_memory"},
    ("chat.api.search", "memory.stores.search"): {
        "DEFAULT_LIMIT",
        "MAX_LIMIT",
        "SearchHit",
        "search_memory",
    },
    ("chat.api.memory", "memory.stores.consolidation"): {"Scope"},
    ("chat.api.context", "memory.stores.consolidation"): {"Scope"},
    ("chat.api.memory", "memory.stores.memory_sources"): {
        "EntrySource",
        "TopicRef",
        "entry_sources",
        "runs_operations",
        "topic_refs",
    },
    ("chat.api.context", "memory.stores.memory_sources"): {"entry_sources"},
    ("chat.api.memory", "memory.stores.notes"): {"read_latest_notes"},
    ("chat.api.memory", "memory.stores.persistent"): {
        "PersistentMemory",
        "scope_memory_entries",
        "truncate_to_budget",
    },
}


def store_imports(source: str) -> dict[str, set[str]]:
    """Store module -> the names imported from it (``*`` for ``import memory.stores.x``)."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memory.stores"):
            found.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("memory.stores"):
                    found.setdefault(alias.name, set()).add("*")
    return found


def chat_store_imports() -> dict[tuple[str, str], set[str]]:
    imports = {}
    for path in sorted((ROOT / "chat").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for store, names in store_imports(path.read_text()).items():
            imports[(module, store)] = names
    return imports


def test_chat_imports_from_the_stores_only_the_listed_reads():
    unlisted = {
        pair: names - READS.get(pair, set())
        for pair, names in chat_store_imports().items()
        if names - READS.get(pair, set())
    }
    assert unlisted == {}


def test_the_contract_allows_exactly_the_listed_pairs():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith(CONTRACT)
    ]
    allowed = {tuple(line.split(" -> ")) for line in contract["ignore_imports"]}
    assert allowed == set(READS)
    assert set(chat_store_imports()) <= allowed


def test_the_check_sees_a_write_taken_from_a_listed_module():
    source = "from memory.stores.notes import append_notes, read_latest_notes\n"
    names = store_imports(source)["memory.stores.notes"]
    assert names - READS[("chat.api.memory", "memory.stores.notes")] == {"append_notes"}
