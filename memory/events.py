"""Every event the server sends to a session's websocket clients, defined once.

The types below are the single definition of each event and of the two resources events
carry, a message and a topic: producers build them with the constructors here, the
websocket consumer forwards them unchanged as JSON frames, and the REST API answers the
same ``MessagePayload`` and ``TopicPayload`` objects (chat/api/schema.py makes their
OpenAPI components from these types). ``docs/websocket-events.schema.json`` is generated
from them (:func:`events_json_schema`; ``make schema`` writes it, a test fails when it is
stale), and ``docs/websocket.md`` shows one example of each.

Events about stored state are published after the database commit
(:func:`publish_on_commit`); the channel layer is whatever settings name
(``CHANNEL_LAYERS``): one that can send from a worker thread (``group_send_blocking``)
does so, any other is reached through its event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,  # pydantic reads its types on Python 3.11
)

from django.db import transaction
from pydantic import Field, TypeAdapter, WithJsonSchema
from typing_extensions import TypedDict

from memory.infra.channels import group_send, record_missed, session_group
from memory.infra.outage import channel_breaker
from memory.lib.text import shown_topic_title
from memory.lib.tool_words import describe_tool_result
from memory.models import Message, Topic
from memory.text.markdown import render_markdown

logger = logging.getLogger(__name__)

Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
MemoryStateName = Literal["none", "promoted", "deprecated"]
MessageRole = Literal["user", "assistant", "tool", "error"]
TopicOrigin = Literal["first", "user", "drift"]


# --- the resources events carry (and the REST API answers) --------------------------------


class TopicPayload(TypedDict):
    """A topic: its text, its memory state (the brain icon) and who set it."""

    id: int
    session_id: int
    title: str
    shown_title: str  # the title, or the one rule's word for a topic without one
    summary: str
    memory_state: MemoryStateName
    # Suggested for memory by its summary but drawn from outside tool results: only the
    # user promotes it (the brain icon).
    memory_suggested: bool
    keep_in_memory_manually_set: bool
    deprecated_manually_set: bool
    summary_manually_set: bool
    is_active: bool
    origin: TopicOrigin
    created_at: Timestamp
    closed_at: Timestamp | None


class MessageVersion(TypedDict):
    """An earlier version of a message: a reply replaced by Regenerate, a question by Edit."""

    content: str
    content_html: str  # a reply's, rendered as a stored reply is; "" for a question
    created_at: str
    stopped: bool


class MessagePayload(TypedDict):
    """A stored message: the user's, the assistant's (with its tool calls), a tool's result,
    or an error record (never sent to the model)."""

    id: int
    seq: int
    session_id: int
    topic_id: int
    role: MessageRole
    content: str
    # An assistant's text as sanitized HTML (memory/text/markdown.py), what the chat page
    # shows; "" for every other role, whose content is shown as text.
    content_html: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    tool_name: str
    tool_sentence: str  # a tool result, said in one sentence for people; "" otherwise
    model_name: str
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    stopped: bool  # a reply the user stopped (turn.cancel): what had streamed until then
    # A reply's record of memory (memory/actions/memory_trace.py): what its request
    # carried ("carried": kinds and ids) and what its turn changed ("changed"); {} else.
    memory_trace: dict[str, Any]
    # Earlier versions of this message, oldest first (Regenerate, Edit): never in context.
    versions: list[MessageVersion]
    created_at: Timestamp


def timestamp(value: datetime | None) -> str | None:
    """A date and time as every interface writes it: ISO 8601 in UTC, ``Z`` for +00:00."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def topic_payload(topic: Topic) -> TopicPayload:
    return {
        "id": topic.pk,
        "session_id": topic.session_id,
        "title": topic.title,
        "shown_title": shown_topic_title(topic.title),
        "summary": topic.summary,
        "memory_state": topic.memory_state.value,
        "memory_suggested": topic.memory_suggested,
        "keep_in_memory_manually_set": topic.keep_in_memory_manually_set,
        "deprecated_manually_set": topic.deprecated_manually_set,
        "summary_manually_set": topic.summary_manually_set,
        "is_active": topic.is_active,
        "origin": topic.origin,
        "created_at": timestamp(topic.created_at),
        "closed_at": timestamp(topic.closed_at),
    }


def message_payload(message: Message, *, calls: dict[str, dict] | None = None) -> MessagePayload:
    """``calls`` (tool-call id -> the call) spares a tool result the lookup of its call."""
    sentence = ""
    if message.role == Message.Role.TOOL:
        call = (calls or {}).get(message.tool_call_id) or _call_of(message)
        sentence = describe_tool_result(
            message.tool_name, (call or {}).get("arguments") or "{}", message.content
        )
    return {
        "id": message.pk,
        "seq": message.seq,
        "session_id": message.session_id,
        "topic_id": message.topic_id,
        "role": message.role,
        "content": message.content,
        "content_html": render_markdown(message.content)
        if message.role == Message.Role.ASSISTANT
        else "",
        "tool_calls": list(message.tool_calls or []),
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "tool_sentence": sentence,
        "model_name": message.model_name,
        "prompt_tokens": message.prompt_tokens,
        "cached_tokens": message.cached_tokens,
        "completion_tokens": message.completion_tokens,
        "stopped": message.stopped,
        "memory_trace": dict(message.memory_trace or {}),
        "versions": _versions(message),
        "created_at": timestamp(message.created_at),
    }


def _versions(message: Message) -> list[MessageVersion]:
    reply = message.role == Message.Role.ASSISTANT
    return [
        {
            "content": str(version.get("content", "")),
            "content_html": render_markdown(str(version.get("content", ""))) if reply else "",
            "created_at": str(version.get("created_at", "")),
            "stopped": bool(version.get("stopped", False)),
        }
        for version in (message.versions or [])
        if isinstance(version, dict)
    ]


def message_payloads(messages: Iterable[Message]) -> list[MessagePayload]:
    """A page of messages: tool results find their calls on the page first."""
    messages = list(messages)
    calls = {call_id: call for message in messages for call_id, call in _calls(message).items()}
    return [message_payload(message, calls=calls) for message in messages]


def _calls(message: Message) -> dict[str, dict]:
    """The ``function`` parts of an assistant message's tool calls, by call id."""
    found = {}
    for call in message.tool_calls or ():
        if isinstance(call, dict) and isinstance(call.get("function"), dict) and call.get("id"):
            found[call["id"]] = call["function"]
    return found


def _call_of(result: Message) -> dict | None:
    """The call a tool result answers: on the latest tool-calling message before it."""
    callers = (
        Message.objects.filter(
            session_id=result.session_id, role=Message.Role.ASSISTANT, seq__lt=result.seq
        )
        .exclude(tool_calls=[])
        .order_by("-seq")
        .values_list("tool_calls", flat=True)
    )
    for tool_calls in callers[:5]:
        call = _calls(Message(tool_calls=tool_calls)).get(result.tool_call_id)
        if call is not None:
            return call
    return None


# --- the events -----------------------------------------------------------------------------


class MessageCreated(TypedDict):
    """A message was stored (the user's, a tool call or result, a final reply)."""

    type: Literal["message.created"]
    message: MessagePayload


class MessagesDeleted(TypedDict):
    """Messages were taken out of the thread: the last reply, replaced by a regenerated one
    (``turn.regenerate``), or the user's last message and its answer, replaced by the
    edited message (``message.edit``); the new turn follows."""

    type: Literal["message.deleted"]
    topic_id: int
    message_ids: list[int]


class TurnStarted(TypedDict):
    """The agent began answering ``user_message_id``; deltas with this ``turn_id`` follow."""

    type: Literal["turn.started"]
    turn_id: str
    user_message_id: int


class ReplyDelta(TypedDict):
    """A piece of the reply being streamed; ``turn_id`` ties deltas to their turn."""

    type: Literal["reply.delta"]
    turn_id: str
    delta: str
    # The reply so far (this model answer's text, every delta until this one) rendered by
    # the server's Markdown rules (memory/text/markdown.py), as a stored reply is: the page
    # shows it in place of the raw text, so a bold word is bold while it streams.
    html: NotRequired[str]


class TurnDone(TypedDict):
    """The turn ended: ``ok`` with its final reply stored, or not after a ``turn.error``;
    ``stopped`` when the user stopped it (``turn.cancel``): the reply stored is what had
    streamed until then."""

    type: Literal["turn.done"]
    turn_id: str
    reply_message_id: int | None
    ok: bool
    stopped: bool


class TurnError(TypedDict):
    """The turn failed; the user's message is stored and can be retried."""

    type: Literal["turn.error"]
    turn_id: str
    error: str
    retryable: bool


class TopicCreated(TypedDict):
    """A new topic became active: started by the user or forked by drift detection."""

    type: Literal["topic.created"]
    topic: TopicPayload
    previous: TopicPayload | None
    relocated_message_ids: list[int]


class TopicUpdated(TypedDict):
    """A topic's title, summary or memory state changed (summary, refresh, curation), or
    it became active again or stopped being so (resumed: the user resumed an earlier one)."""

    type: Literal["topic.updated"]
    topic: TopicPayload
    reason: Literal["summary", "refresh", "curation", "resumed"]


class TopicDeleted(TypedDict):
    """An earlier topic of the session was deleted (with its messages and notes)."""

    type: Literal["topic.deleted"]
    topic_id: int


class SessionUpdated(TypedDict):
    """The session was renamed (an empty ``title``: it shows its active topic's title)."""

    type: Literal["session.updated"]
    session_id: int
    title: str


class FactChanged(TypedDict):
    """A durable fact of the session's scope was set (``removed`` false) or removed, as
    ``key`` is stored; read the facts again for its value and provenance."""

    type: Literal["fact.changed"]
    key: str
    removed: bool


class SessionDeleted(TypedDict):
    """The session was deleted; the server closes the socket after sending this."""

    type: Literal["session.deleted"]
    session_id: int


class ErrorEvent(TypedDict):
    """A frame from the client was refused (``code`` as the REST API's); the connection
    stays open."""

    type: Literal["error"]
    code: str
    message: str


Event = (
    MessageCreated
    | MessagesDeleted
    | TurnStarted
    | ReplyDelta
    | TurnDone
    | TurnError
    | TopicCreated
    | TopicUpdated
    | TopicDeleted
    | SessionUpdated
    | FactChanged
    | SessionDeleted
    | ErrorEvent
)


def message_created(message: Message) -> MessageCreated:
    return {"type": "message.created", "message": message_payload(message)}


def messages_deleted(*, topic_id: int, message_ids: Iterable[int]) -> MessagesDeleted:
    return {"type": "message.deleted", "topic_id": topic_id, "message_ids": list(message_ids)}


def turn_started(turn_id: str, *, user_message_id: int) -> TurnStarted:
    return {"type": "turn.started", "turn_id": turn_id, "user_message_id": user_message_id}


def reply_delta(turn_id: str, delta: str, *, so_far: str | None = None) -> ReplyDelta:
    """``so_far``: the answer's text until now, sent rendered as ``html`` too."""
    event: ReplyDelta = {"type": "reply.delta", "turn_id": turn_id, "delta": delta}
    if so_far is not None:
        event["html"] = render_markdown(so_far)
    return event


def turn_done(
    turn_id: str, *, reply_message_id: int | None, ok: bool, stopped: bool = False
) -> TurnDone:
    return {
        "type": "turn.done",
        "turn_id": turn_id,
        "reply_message_id": reply_message_id,
        "ok": ok,
        "stopped": stopped,
    }


def turn_error(turn_id: str, error: str) -> TurnError:
    """Every failed turn can be retried: the user's message is stored."""
    return {"type": "turn.error", "turn_id": turn_id, "error": error, "retryable": True}


def topic_created(*, topic: Topic, previous: Topic | None, relocated_message_ids) -> TopicCreated:
    return {
        "type": "topic.created",
        "topic": topic_payload(topic),
        "previous": topic_payload(previous) if previous is not None else None,
        "relocated_message_ids": list(relocated_message_ids),
    }


def topic_updated(
    topic: Topic, *, reason: Literal["summary", "refresh", "curation", "resumed"]
) -> TopicUpdated:
    return {"type": "topic.updated", "topic": topic_payload(topic), "reason": reason}


def topic_deleted(topic_id: int) -> TopicDeleted:
    return {"type": "topic.deleted", "topic_id": topic_id}


def session_updated(*, session_id: int, title: str) -> SessionUpdated:
    return {"type": "session.updated", "session_id": session_id, "title": title}


def fact_changed(*, key: str, removed: bool) -> FactChanged:
    return {"type": "fact.changed", "key": key, "removed": removed}


def session_deleted(session_id: int) -> SessionDeleted:
    return {"type": "session.deleted", "session_id": session_id}


def error_event(code: str, message: str) -> ErrorEvent:
    """A refused frame, for the socket that sent it (never published to the group)."""
    return {"type": "error", "code": code, "message": message}


def events_json_schema() -> dict[str, Any]:
    """The JSON Schema of every event, generated from the types above: what
    ``docs/websocket-events.schema.json`` holds. One of the events, told apart by ``type``
    (``discriminator.mapping``); objects are closed (no other keys)."""
    events = TypeAdapter(Annotated[Event, Field(discriminator="type")])
    schema = events.json_schema(ref_template="#/$defs/{model}")
    definitions = schema.pop("$defs")
    for definition in definitions.values():
        definition["additionalProperties"] = False
        for field in definition["properties"].values():
            field.pop("title", None)  # pydantic's, made from the key: noise
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://driftless.invalid/websocket-events.schema.json",
        "title": "Driftless websocket server events",
        "description": (
            "Generated from memory/events.py (make schema): the exact shape of every event "
            "the server sends on a session's websocket; docs/websocket.md explains them."
        ),
        **schema,
        "$defs": dict(sorted(definitions.items())),
    }


# --- publishing -------------------------------------------------------------------------------


def publish(session_id: int, event: Event, *, hold: bool = False) -> None:
    """Send now (or with the other events of this moment, inside :func:`outbox`). Use for
    ephemeral events (reply deltas) that carry no stored state. A reply delta leaves at
    once, unless ``hold``: then it waits in the outbox for the next delivery (a reply's
    last piece, with the turn's end a few milliseconds later: one delivery less).

    Best effort (memory/infra/outage.py): a dead channel layer never fails the write that
    happened, and is skipped for a moment after it failed; what is not delivered is
    counted (:func:`missed_deliveries`), so the socket waiting for it is told."""
    box = getattr(_outboxes, "box", None)
    if box is not None and box.session_id == session_id:
        box.events.append(event)
        if event["type"] == "reply.delta" and not hold:  # streaming: not held back
            box.flush()
        return
    _send(session_id, [event])


@contextmanager
def outbox(session_id: int) -> Iterator[_Outbox]:
    """Within the block, this thread's events for the session leave together, as one
    channel-layer message, when :meth:`_Outbox.flush` is called, with a reply delta, and
    at the end: a turn's start (the user's message, turn.started) and end (the reply,
    turn.done) cost one delivery each instead of two. Order is kept."""
    box = _Outbox(session_id)
    previous, _outboxes.box = getattr(_outboxes, "box", None), box
    try:
        yield box
    finally:
        _outboxes.box = previous
        box.flush()


def flush_outbox() -> None:
    """Send what this thread's :func:`outbox` holds now (nothing outside one)."""
    box = getattr(_outboxes, "box", None)
    if box is not None:
        box.flush()


class _Outbox:
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.events: list[Event] = []

    def flush(self) -> None:
        events, self.events = self.events, []
        if events:
            _send(self.session_id, events)


_outboxes = threading.local()


def _send(session_id: int, events: list[Event]) -> None:
    if channel_breaker.allows():
        try:
            with channel_breaker.watch():
                group_send(session_group(session_id), {"type": "session.events", "events": events})
            return
        except Exception:
            pass
    logger.debug("could not publish %s to session %s", [e["type"] for e in events], session_id)
    record_missed({session_id: time.time()})


def publish_on_commit(session_id: int, event: Event) -> None:
    """Send once the current transaction commits, so clients never see unsaved state."""
    transaction.on_commit(lambda: publish(session_id, event))
