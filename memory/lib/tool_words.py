"""What a tool call did, in one sentence for people ("Remembered: favourite colour = teal").

The offline model answers a memory command with it; the chat page's tool cards say the
same in static/js/thread.js (describeTool). Pure functions over the call's arguments and
its JSON result: no database, so any part of the code may use them.
"""

from __future__ import annotations

import json
from typing import Any

from memory.lib.text import one_line

# The built-in tools read and write the agent's own stores; every other tool (MCP) brings
# text from outside, which a summary may carry but never promote without the user.
BUILTIN_TOOL_NAMES: tuple[str, ...] = ("notes", "important_info", "manage_topic_memory", "recall")
# Outside text is what entered through a tool, not from the user: every MCP result, and
# what the built-ins bring back from elsewhere, a ``recall`` (earlier messages, tool results
# among them) and a ``notes`` read (notes written in another turn, perhaps from a web
# page). Only the built-ins' acknowledgements of a write (``{"ok": true, ...}``), the facts
# (the user's, or set by the agent under the rule below) and curation answers are inside.
# A topic holding outside text is never promoted without the user, and the agent cannot set
# or remove a fact in a session that holds any (docs/memory.md, "Outside text").
RECALLED_TOOL_NAMES: tuple[str, ...] = ("recall", "notes")
WRITE_ACKNOWLEDGED = '{"ok": true'


def is_outside_text(tool_name: str, content: str) -> bool:
    """Whether a tool result (its tool's name, its stored JSON text) is outside text."""
    if tool_name not in BUILTIN_TOOL_NAMES:
        return True
    return tool_name in RECALLED_TOOL_NAMES and not content.startswith(WRITE_ACKNOWLEDGED)


_LIMIT = 120
_STATE_WORDS = {
    "promoted": "is in memory",
    "none": "is not in memory",
    "deprecated": "is deprecated (remembered as reversed)",
}
_ACTION_WORDS = {
    "promote": "Promoted “{}” to memory",
    "demote": "Took “{}” out of memory",
    "deprecate": "Deprecated “{}”",
}


def describe_tool_result(name: str, arguments: Any, result: Any) -> str:
    """One sentence for a call of tool ``name``; arguments and result as stored (JSON text)."""
    args = json_object(arguments)
    data = json_object(result)
    if "error" in data:
        return f"{name} failed: {_short(data['error'])}"
    operation = args.get("operation")
    if name == "important_info" and operation in ("$set", "$unset", "read"):
        return _facts_sentence(args, data)
    if name == "notes" and operation in ("$set", "update", "read"):
        return _notes_sentence(args, data)
    if name == "manage_topic_memory" and "memory_state" in data:
        return _topic_sentence(args, data)
    if name == "recall" and ("hits" in data or "turns" in data):
        return _recall_sentence(data)
    return f"{name} answered." + (" (The answer was cut.)" if data.get("truncated") else "")


def _facts_sentence(args: dict, data: dict) -> str:
    operation = args.get("operation")
    key = data.get("key", args.get("key"))
    if operation == "$set":
        return f"Remembered: {key} = {_short(data.get('value', args.get('value')))}"
    if operation == "$unset":
        return f"Forgot: {key}" if data.get("removed") else f"Nothing stored under '{key}'"
    if "facts" in data:
        facts = data["facts"] if isinstance(data["facts"], dict) else {}
        if not facts:
            return "No facts stored yet."
        listed = "; ".join(f"{k} = {_short(v, 40)}" for k, v in facts.items())
        return _short(f"Read {len(facts)} fact{'s' if len(facts) != 1 else ''}: {listed}")
    if data.get("found"):
        return f"{key} = {_short(data.get('value'))}"
    return f"Nothing stored under '{key}'"


def _notes_sentence(args: dict, data: dict) -> str:
    operation = args.get("operation")
    if operation == "$set":
        return f"Noted: {_short(args.get('content', ''))}"
    if operation == "update":
        return "Rewrote the notes of this topic."
    if data.get("title"):  # a topic named by its id: its summary comes with its notes
        return _short(f"Looked up the earlier topic “{data['title']}”.")
    notes = data.get("notes") or ""
    if not notes:
        return "The notes are empty."
    return "Read the archived notes." if data.get("archived") else "Read the notes of this topic."


def _topic_sentence(args: dict, data: dict) -> str:
    title = data.get("title") or "this topic"
    if data.get("changed"):
        template = _ACTION_WORDS.get(str(args.get("action")), "Changed the memory of “{}”")
        return template.format(title)
    state = _STATE_WORDS.get(str(data.get("memory_state")), "is unchanged")
    return f"No change: “{title}” {state}."


def _recall_sentence(data: dict) -> str:
    if "hits" in data:
        count = len(data["hits"]) if isinstance(data["hits"], list) else 0
        hits = "no hits" if not count else f"{count} hit{'s' if count != 1 else ''}"
        return f"Searched past chats for “{_short(data.get('query', ''), 60)}”: {hits}"
    turns = len(data["turns"]) if isinstance(data["turns"], list) else 0
    where = _short(data.get("topic") or "an earlier topic", 60)
    day = f", {data['date']}" if data.get("date") else ""
    return f"Read {turns} turn{'s' if turns != 1 else ''} of a past chat (“{where}”{day})."


def json_object(value: Any) -> dict:
    """A tool call's arguments or result as a dict: parsed when it is JSON text, ``{}``
    when it is not an object."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _short(value: Any, limit: int = _LIMIT) -> str:
    return one_line(
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), limit
    )
