"""The agent's built-in runtime tools: ``notes``, ``important_info``, ``manage_topic_memory``
and ``recall``.

They read and write the agent's own memory stores and are dispatched ahead of any other
tool source (MCP): a built-in name always wins. Every result, success or error, is a
JSON string stored as a ``tool`` message in the active topic's thread, so the model
reasons over what it just did and the summary of the topic covers it.

A tool only ever reaches the caller's own scope, and only while the session's user may
still reach it (``Session.objects.owned_by``: a member of its organization, active); a call
after access ended is refused and changes nothing. ``notes`` reaches the topics of the
same session, ``manage_topic_memory`` the topics of the session's (agent, user,
organization) scope (the memory blocks name them ``[#id]``), ``important_info`` the facts
of that scope, ``recall`` the past chats of that scope (memory/stores/recall/ranking.py: the
user's messages, topics in any memory state, archived notes; read-only). A topic or
message id outside that reach gets the same refusal as an id that does not exist, so
nothing about it leaks. Bad input (unknown tool, invalid JSON, a missing or wrong field)
becomes an error result the model can read and correct; it never raises and never kills
the turn.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from django.db import transaction

from memory.actions.curation import do_agent_curation
from memory.actions.facts import do_set_fact, do_unset_fact
from memory.lib.errors import OUTSIDE_TEXT_FACT_ERROR, InvalidInput, Refused
from memory.lib.text import one_line
from memory.lib.tool_words import BUILTIN_TOOL_NAMES
from memory.lib.validation import loads_json
from memory.llm import ToolCall
from memory.models import FactActor, Message, Session, Topic
from memory.stores.facts import (
    check_fact_key,
    find_fact_key,
    read_fact,
    read_facts,
)
from memory.stores.messages import store_message
from memory.stores.notes import append_notes, read_latest_notes, replace_notes
from memory.stores.recall.ranking import (
    RECALL_DEFAULT_HITS,
    RECALL_MAX_HITS,
    read_past_chat,
    search_past_chats,
)

logger = logging.getLogger(__name__)


# What another tool source may return is cut here: a result rides in the window on the
# following turns, and one huge result must not crowd out the conversation.
MAX_TOOL_RESULT_CHARS = 20_000

# Every request carries these schemas, so every word of them is paid for on every turn
# (a small model reads them at ~70 tokens/s): say what the model needs to choose and call
# a tool, no more. The rules themselves are enforced by the handlers, whatever is said here.
_SCHEMAS: dict[str, dict] = {
    "notes": {
        "description": (
            "This topic's working notes (decisions, drafts), shown to you on every turn of "
            "it. $set appends; update replaces them all; read returns them, or another "
            "topic's of this session (topic_id) with its summary. Facts that must never "
            "be lost go to important_info."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": ["$set", "read", "update"]},
                "content": {"type": "string", "description": "$set, update: the text."},
                "topic_id": {"type": "integer", "description": "read: default current."},
            },
            "required": ["operation"],
            "additionalProperties": False,
        },
    },
    "important_info": {
        "description": (
            "Durable facts about this user that must stay exact (names, settings, standing "
            "decisions), shown in every session. $set key to value; read all, or one key "
            "with its history; $unset key. A fact the user set is theirs: you cannot "
            "change it."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": ["$set", "read", "$unset"]},
                "key": {"type": "string"},
                "value": {"description": "$set: any JSON value."},
            },
            "required": ["operation"],
            "additionalProperties": False,
        },
    },
    "manage_topic_memory": {
        "description": (
            "Whether a topic is remembered in future sessions: promote, demote, or "
            "deprecate (its decision was reversed). The current topic, or topic_id: the N "
            "of [#N] in your memory. The user's own choice for a topic stands."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["promote", "demote", "deprecate"]},
                "topic_id": {"type": "integer"},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    },
    "recall": {
        "description": (
            "Search your past chats with this user (messages, topics, notes of every "
            "session) for what your memory does not hold. search: query, a few keywords; "
            "hits best first, dated, with ids. read: the turns around a message_id, or a "
            "topic_id."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": ["search", "read"]},
                "query": {"type": "string"},
                "message_id": {"type": "integer"},
                "topic_id": {"type": "integer"},
                "limit": {
                    "type": "integer",
                    "description": f"1 to {RECALL_MAX_HITS} ({RECALL_DEFAULT_HITS}).",
                },
            },
            "required": ["operation"],
            "additionalProperties": False,
        },
    },
}


class ToolSource(Protocol):
    """Tools beyond the built-ins (e.g. MCP), consulted only for other names."""

    def has_tool(self, name: str) -> bool: ...

    def call(self, name: str, arguments: dict) -> str: ...


class ToolError(Refused):
    """A call the model can correct; the message is shown to it as the error."""

    code = "invalid_call"


def builtin_tool_schemas() -> list[dict]:
    """The OpenAI ``tools`` definitions of the built-ins, in BUILTIN_TOOL_NAMES order."""
    return [
        {"type": "function", "function": {"name": name, **copy.deepcopy(_SCHEMAS[name])}}
        for name in BUILTIN_TOOL_NAMES
    ]


REPEATED_CALL_NOTE = (
    "You already made this exact call in this turn; this is its result again, and it "
    "was not run twice. Answer the user now from what you have."
)


class CallResults:
    """What the calls of one turn returned, by tool and arguments: a call made again is
    answered from its earlier result (not run twice) and counted in ``repeated``.

    Small models call the same tool again after its result, round after round; a turn
    that keeps one of these stops them at the first repeat (memory/actions/turn.py). A
    built-in's write forgets the reads of the same tool before it, so a read after a write
    runs again (its earlier result is stale); a write repeated is never run twice.
    """

    def __init__(self) -> None:
        self._results: dict[tuple[str, str], dict[str, Any]] = {}
        self.repeated = 0

    def earlier(self, call: ToolCall) -> dict[str, Any] | None:
        result = self._results.get(_call_key(call))
        if result is not None:
            self.repeated += 1
        return result

    def remember(self, call: ToolCall, result: dict[str, Any]) -> None:
        key = _call_key(call)
        if call.name in _HANDLERS and not _reads(key[1]):
            for stale in [k for k in self._results if k[0] == call.name and _reads(k[1])]:
                del self._results[stale]
        self._results[key] = result


def _reads(arguments: str) -> bool:
    """Whether a built-in call (its canonical arguments) only reads."""
    try:
        operation = json.loads(arguments).get("operation")
    except (ValueError, AttributeError):
        return False
    return operation in _READ_OPERATIONS


def _call_key(call: ToolCall) -> tuple[str, str]:
    """A call's tool and its arguments as canonical JSON (key order and spacing aside)."""
    try:
        arguments = json.dumps(_parse_arguments(call.arguments), sort_keys=True)
    except Refused:
        arguments = str(call.arguments or "").strip()
    return call.name, arguments


def dispatch_tool_calls(
    *,
    session: Session,
    tool_calls: Sequence[ToolCall],
    other: ToolSource | None = None,
    actor: str = FactActor.AGENT,
    results: CallResults | None = None,
) -> list[Message]:
    """Run each call in order and store its result as a tool message in the active topic.

    The caller has already stored the assistant message carrying ``tool_calls``. The
    calls are the agent's, except for the user's own memory commands (``/remember``...,
    memory/actions/turn.py), which run with ``actor`` the user. With ``results``, a call
    made before in the same turn is answered from its earlier result, with a note.
    """
    messages = []
    for call in tool_calls:
        earlier = results.earlier(call) if results is not None else None
        if earlier is not None:
            result = {**earlier, "note": REPEATED_CALL_NOTE}
        else:
            result = _run(session=session, call=call, other=other, actor=actor)
            if results is not None:
                results.remember(call, result)
        messages.append(
            store_message(
                session=session,
                role=Message.Role.TOOL,
                tool_call_id=call.id,
                tool_name=call.name,
                content=json.dumps(result, ensure_ascii=False),
            )
        )
    return messages


# Small models invent tools ("multiply" for 17×3): the result tells them what to do instead.
UNKNOWN_TOOL_NOTE = (
    "There is no tool by that name. Answer the user yourself, or call one of the tools you "
    f"were given ({', '.join(BUILTIN_TOOL_NAMES)}, or another listed one)."
)

ACCESS_ENDED_ERROR = "the session's user no longer has access to it; nothing was done"


def _run(
    *, session: Session, call: ToolCall, other: ToolSource | None, actor: str
) -> dict[str, Any]:
    # Asked afresh for every call: a turn may outlive its user's membership.
    if not session.still_reachable():
        return {"error": ACCESS_ENDED_ERROR}
    handler = _HANDLERS.get(call.name)
    if handler is None and not _other_has(other, call.name):
        return {"error": f"unknown tool {call.name!r}", "note": UNKNOWN_TOOL_NOTE}
    try:
        arguments = _parse_arguments(call.arguments)
    except Refused as refused:
        return tool_refusal(refused)
    if handler is None:
        return _run_other(other, call.name, arguments)
    try:
        _check_fields(call.name, arguments)
        # A savepoint: a database error inside one tool must not break the caller's
        # transaction or the calls that follow.
        with transaction.atomic():
            return handler(session, arguments, actor)
    except Refused as refused:  # the guard's words, or a limit met, reach the model
        return tool_refusal(refused)
    except Exception:
        logger.exception("built-in tool %s failed in session %s", call.name, session.pk)
        return {"error": f"{call.name} failed unexpectedly; nothing was changed"}


def tool_refusal(refused: Refused) -> dict[str, Any]:
    """A refusal as the model reads it: what is wrong, and for a limit met, which one and
    how much room is left (a fact's ``details``). One mapping for every built-in."""
    return {"error": refused.message, **getattr(refused, "details", {})}


def _other_has(other: ToolSource | None, name: str) -> bool:
    if other is None or not name:
        return False
    try:
        return bool(other.has_tool(name))
    except Exception:
        logger.exception("tool source failed to answer whether it has %s", name)
        return False


def _run_other(other: ToolSource, name: str, arguments: dict) -> dict[str, Any]:
    try:
        text = other.call(name, arguments)
    except Exception as err:  # Anything a foreign tool raises is the model's to read.
        logger.warning("tool %s failed: %s", name, err)
        return {"error": f"{name} failed: {one_line(str(err), 300) or type(err).__name__}"}
    text = text if isinstance(text, str) else str(text)
    if len(text) > MAX_TOOL_RESULT_CHARS:
        return {"result": text[:MAX_TOOL_RESULT_CHARS], "truncated": True}
    return {"result": text}


def _parse_arguments(raw: str) -> dict:
    if raw is None or not str(raw).strip():
        return {}  # some models send "" for a call without arguments
    try:
        arguments = loads_json(str(raw), field="arguments")
    except InvalidInput as err:
        raise ToolError(err.message) from err
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object")
    return arguments


def _check_fields(name: str, arguments: dict) -> None:
    allowed = _SCHEMAS[name]["parameters"]["properties"]
    unexpected = sorted(set(arguments) - set(allowed))
    if unexpected:
        raise ToolError(
            f"unexpected field(s) {', '.join(unexpected)}; {name} takes {', '.join(allowed)}"
        )


# --- the built-ins -----------------------------------------------------------------------


def _notes(session: Session, arguments: dict, actor: str) -> dict[str, Any]:
    operation = _operation(arguments, ("$set", "read", "update"))
    active = _active_topic(session)
    if operation == "read":
        topic = active
        if arguments.get("topic_id") is not None:
            topic = _own_topic(session, arguments["topic_id"])
        content, archived = read_latest_notes(topic=topic)
        if topic.pk == active.pk:
            return {"topic_id": topic.pk, "notes": content, "archived": archived}
        # An earlier topic: the block may list it by title only, so its summary comes too.
        return {
            "topic_id": topic.pk,
            "title": topic.title,
            # A deprecated topic's decision was reversed: only its title stays, as in the
            # memory blocks.
            "summary": "" if topic.deprecated else topic.summary,
            "deprecated": topic.deprecated,
            "notes": content,
            "archived": archived,
        }
    if arguments.get("topic_id") is not None:
        topic = _own_topic(session, arguments["topic_id"])
        if topic.pk != active.pk:
            raise ToolError("notes can only be written for the current topic")
    if "content" not in arguments:
        raise ToolError(f"content is required for {operation}")
    if operation == "$set":
        content = append_notes(topic=active, text=arguments["content"])
    else:
        content = replace_notes(topic=active, content=arguments["content"])
    return {"ok": True, "topic_id": active.pk, "notes": content}


def _important_info(session: Session, arguments: dict, actor: str) -> dict[str, Any]:
    operation = _operation(arguments, ("$set", "read", "$unset"))
    scope = {"user": session.user, "agent": session.agent}
    if operation == "read":
        if arguments.get("key") is None:
            return {"facts": dict(sorted(read_facts(**scope).items()))}
        fact = read_fact(**scope, key=_text_field(arguments, "key"))
        if not fact["found"] and not fact["history"]:
            return {"key": fact["key"], "found": False}
        return fact  # with who set it, when, and its earlier values
    key = _text_field(arguments, "key")
    if actor == FactActor.AGENT and session.messages.outside_tool_results().exists():
        raise ToolError(OUTSIDE_TEXT_FACT_ERROR)  # an injection must not reach every prefix
    # The turn's topic: where the fact was learnt (its provenance).
    # The session's open sockets are told (fact.changed), as for the user's own writes.
    writer = {"session": session, "actor": actor, "topic_id": _active_topic(session).pk}
    if operation == "$set":
        if "value" not in arguments:
            raise ToolError("value is required for $set")
        data = do_set_fact(key=key, value=arguments["value"], **writer)
        stored = find_fact_key(data, check_fact_key(key)) or key
        return {"ok": True, "key": stored, "value": data.get(stored)}
    return {"ok": True, "key": key, "removed": do_unset_fact(key=key, **writer)}


def _manage_topic_memory(session: Session, arguments: dict, actor: str) -> dict[str, Any]:
    action = arguments.get("action")
    if not isinstance(action, str) or not action:
        raise ToolError("action is required: one of promote, demote, deprecate")
    topic = _active_topic(session)
    if arguments.get("topic_id") is not None:
        topic = _scope_topic(session, arguments["topic_id"])
    # The guard's refusal (CurationRefused) reaches the model word for word.
    decision = do_agent_curation(topic=topic, action=action)
    topic.refresh_from_db(fields=["keep_in_memory", "deprecated", "title"])
    return {
        "ok": True,
        "topic_id": topic.pk,
        "title": topic.title,
        "memory_state": topic.memory_state.value,
        "changed": decision is not None,
    }


def _recall(session: Session, arguments: dict, actor: str) -> dict[str, Any]:
    operation = arguments.get("operation")
    if operation is None:  # small models leave it out: the arguments say which one
        operation = "search" if "query" in arguments else "read"
    operation = _operation({"operation": operation}, ("search", "read"))
    if operation == "read":
        message_id, topic_id = arguments.get("message_id"), arguments.get("topic_id")
        if message_id is None and topic_id is None:
            raise ToolError("read needs the message_id or the topic_id of a hit")
        if message_id is not None:
            return read_past_chat(
                session=session, message_id=_whole_number(message_id, "message_id")
            )
        return read_past_chat(session=session, topic_id=_topic_id(topic_id))
    query = _text_field(arguments, "query")
    limit = arguments.get("limit")
    limit = RECALL_DEFAULT_HITS if limit is None else _whole_number(limit, "limit")
    hits = search_past_chats(
        session=session, query=query, limit=limit, exclude_topic_id=_active_topic(session).pk
    )
    result: dict[str, Any] = {"query": query, "count": len(hits)}
    result["hits"] = [hit.as_dict() for hit in hits]
    if not hits:
        result["note"] = "nothing in the past chats matches these words"
    return result


# The built-ins' operations that change nothing.
_READ_OPERATIONS = ("read", "search")

_HANDLERS: dict[str, Callable[[Session, dict, str], dict[str, Any]]] = {
    "notes": _notes,
    "important_info": _important_info,
    "manage_topic_memory": _manage_topic_memory,
    "recall": _recall,
}


# --- argument helpers --------------------------------------------------------------------


def _operation(arguments: dict, allowed: tuple[str, ...]) -> str:
    operation = arguments.get("operation")
    if operation not in allowed:
        raise ToolError(f"operation must be one of {', '.join(allowed)}; got {operation!r}")
    return operation


def _text_field(arguments: dict, name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{name} must be a non-empty string")
    return value.strip()


def _active_topic(session: Session) -> Topic:
    return Topic.objects.get(session_id=session.pk, is_active=True)


def _own_topic(session: Session, topic_id: object) -> Topic:
    """A topic of this session, or the same refusal whether the id exists or not."""
    topic_id = _topic_id(topic_id)
    topic = Topic.objects.filter(pk=topic_id, session_id=session.pk).first()
    if topic is None:
        raise ToolError(f"topic {topic_id} is not a topic of this session")
    return topic


def _scope_topic(session: Session, topic_id: object) -> Topic:
    """A topic of the session's (agent, user, organization) scope, any of its sessions;
    the same refusal whether the id exists or not."""
    topic_id = _topic_id(topic_id)
    topic = (
        Topic.objects.owned_by(session.user)
        .in_scope(
            agent_id=session.agent_id,
            user_id=session.user_id,
            organization_id=session.organization_id,
        )
        .filter(pk=topic_id)
        .first()
    )
    if topic is None:
        raise ToolError(f"topic {topic_id} is not one of your topics with this user")
    return topic


def _topic_id(raw: object) -> int:
    """An integer id; "7" and "#7" (as the blocks print it) are accepted too."""
    return _whole_number(raw, "topic_id")


def _whole_number(raw: object, name: str) -> int:
    """An integer; "7" and "#7" are accepted too."""
    if isinstance(raw, str) and raw.strip().lstrip("#").isdigit():
        raw = int(raw.strip().lstrip("#"))
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ToolError(f"{name} must be an integer")
    return raw
