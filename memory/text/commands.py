"""The user's memory commands: ``/remember KEY = VALUE``, ``/forget KEY``, ``/note TEXT``.

They are the user's own words to their memory, not a request to the model: the turn
(memory/actions/turn.py) carries them out as the user, whatever model is configured, and
never asks the model. Parsed here once, for the turn and for the offline model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USAGE = {
    "/remember": "Usage: /remember KEY = VALUE (for example: /remember favourite colour = teal).",
    "/forget": "Usage: /forget KEY (for example: /forget favourite colour).",
    "/note": "Usage: /note TEXT (for example: /note we chose PostgreSQL for production).",
}


@dataclass(frozen=True)
class MemoryCommand:
    """A command as the built-in tool call it stands for; ``tool`` is None when the text
    was a command word used wrongly, and ``usage`` then says how to write it."""

    tool: str | None
    arguments: dict[str, str] = field(default_factory=dict)
    usage: str = ""


def parse_memory_command(text: str) -> MemoryCommand | None:
    """The command ``text`` is, or None when it is not one (a message for the model)."""
    word, rest = ([*text.split(maxsplit=1), "", ""])[:2]
    rest = rest.strip()
    if word not in USAGE:
        return None
    if word == "/remember":
        key, equals, value = rest.partition("=")
        if not (equals and key.strip() and value.strip()):
            return MemoryCommand(tool=None, usage=USAGE[word])
        arguments = {"operation": "$set", "key": key.strip(), "value": value.strip()}
        return MemoryCommand(tool="important_info", arguments=arguments)
    if not rest:
        return MemoryCommand(tool=None, usage=USAGE[word])
    if word == "/forget":
        return MemoryCommand(tool="important_info", arguments={"operation": "$unset", "key": rest})
    return MemoryCommand(tool="notes", arguments={"operation": "$set", "content": rest})
