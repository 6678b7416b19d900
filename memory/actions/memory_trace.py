"""A reply's record of memory: what its request carried, and what its turn changed.

Stored on the reply (``Message.memory_trace``) when the turn stores it, so the chat's
"Memory in this reply" line, the REST representation, the socket's ``turn.done`` and an
export all read the same record, after a reload too:

``carried``: what the request held from memory, from the ContextStack that
``assemble_context`` returned (memory/actions/context.py, ``ContextStack.carried``): the
persistent-memory entries (``memory``: topic and session ids, the title), the durable
facts (``fact``: their keys, never their values: the Facts panel has those), the active
topic's notes (``notes``) and the passages recalled from earlier conversations
(``recalled``: the message, its topic and session; ``earlier`` when an earlier turn's
block recalled it and the request kept that block in place).

``changed``: what the turn's own tool calls (or the user's ``/remember``, ``/forget``,
``/note``) wrote to memory, each with the sentence people read ("Remembered: passport =
expires in May") and what the chat needs to undo it (the fact's key, the topic's id).
``command`` says the changes were the user's own command, whose sentence is the reply.

Everything in it is of the session's own scope: context assembly and the tools read and
write that scope only, so the record never names anything of another one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memory.lib.tool_words import describe_tool_result, json_object
from memory.models import Message

# The kinds of ``carried``, in the order the chat lists them.
CARRIED_KINDS = ("memory", "fact", "notes", "recalled")
_FACT_WRITES = ("$set", "$unset")
_NOTE_WRITES = ("$set", "update")


def memory_trace(
    carried: Sequence[dict], activity: Iterable[Message], *, command: bool = False
) -> dict:
    """The record stored on a reply: the request's ``carried`` and the turn's changes."""
    trace: dict = {"carried": [dict(item) for item in carried], "changed": _changes(activity)}
    if command:
        trace["command"] = True
    return trace


def _changes(activity: Iterable[Message]) -> list[dict]:
    activity = list(activity)
    calls = {
        call.get("id"): call.get("function") or {}
        for message in activity
        for call in (message.tool_calls or [])
        if isinstance(call, dict)
    }
    changes = []
    for message in activity:
        if message.role != Message.Role.TOOL:
            continue
        arguments = (calls.get(message.tool_call_id) or {}).get("arguments") or "{}"
        change = _change(message, json_object(arguments), json_object(message.content))
        if change is not None:
            change["sentence"] = describe_tool_result(message.tool_name, arguments, message.content)
            changes.append(change)
    return changes


def _change(message: Message, args: dict, data: dict) -> dict | None:
    """What one tool result changed in memory, or None (a read, a failure, no change)."""
    if "error" in data:
        return None
    name, operation = message.tool_name, args.get("operation")
    if name == "important_info" and operation in _FACT_WRITES:
        if operation == "$unset" and not data.get("removed"):
            return None
        key = data.get("key", args.get("key"))
        action = "set" if operation == "$set" else "unset"
        return {"kind": "fact", "action": action, "key": str(key)}
    if name == "notes" and operation in _NOTE_WRITES:
        return {"kind": "notes", "action": "write", "topic_id": message.topic_id}
    if name == "manage_topic_memory" and data.get("changed"):
        topic_id = data.get("topic_id", args.get("topic_id", message.topic_id))
        return {"kind": "topic", "action": str(args.get("action", "")), "topic_id": topic_id}
    return None
