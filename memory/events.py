"""Every event the server sends to a session's websocket clients, defined once.

Producers (the agent turn, the evaluation pipeline, curation) build events with these
types and publish them with :func:`publish_on_commit`; the websocket consumer forwards
them unchanged as JSON frames. ``docs/websocket.md`` shows one example of each, and
``docs/websocket-events.schema.json`` gives each one's exact shape. Messages and topics
inside events are the same representation the REST API answers with
(memory/representations.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypedDict

from channels.layers import get_channel_layer
from django.db import transaction

from driftless.channel_layer import group_send_from_thread
from memory.lib.outage import channel_breaker
from memory.representations import message_representation, topic_representation

logger = logging.getLogger(__name__)


class TopicPayload(TypedDict):
    """memory.representations.TopicRepresentation."""

    id: int
    session_id: int
    title: str
    summary: str
    memory_state: Literal["none", "promoted", "deprecated"]
    keep_in_memory_manually_set: bool
    deprecated_manually_set: bool
    summary_manually_set: bool
    is_active: bool
    origin: str
    created_at: str
    closed_at: str | None


class MessagePayload(TypedDict):
    """memory.representations.MessageRepresentation."""

    id: int
    seq: int
    session_id: int
    topic_id: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    tool_name: str
    model_name: str
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    created_at: str


class MessageCreated(TypedDict):
    """A message was stored (the user's, a tool call or result, a final reply)."""

    type: Literal["message.created"]
    message: MessagePayload


class TurnStarted(TypedDict):
    """The agent began answering ``user_message_id``; deltas with this ``turn_id`` follow."""

    type: Literal["turn.started"]
    turn_id: str
    user_message_id: int


class TurnDone(TypedDict):
    """The turn ended: ``ok`` with its final reply stored, or not after a ``turn.error``."""

    type: Literal["turn.done"]
    turn_id: str
    reply_message_id: int | None
    ok: bool


class ReplyDelta(TypedDict):
    """A piece of the reply being streamed; ``turn_id`` ties deltas to their turn."""

    type: Literal["reply.delta"]
    turn_id: str
    delta: str


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
    """A topic's title, summary or memory state changed (summary, refresh, curation)."""

    type: Literal["topic.updated"]
    topic: TopicPayload
    reason: Literal["summary", "refresh", "curation"]


class TopicDeleted(TypedDict):
    """An earlier topic of the session was deleted (with its messages and notes)."""

    type: Literal["topic.deleted"]
    topic_id: int


class SessionDeleted(TypedDict):
    """The session was deleted; the server closes the socket after sending this."""

    type: Literal["session.deleted"]
    session_id: int


class ErrorEvent(TypedDict):
    """A frame from the client was refused; the connection stays open."""

    type: Literal["error"]
    code: str
    message: str


Event = (
    MessageCreated
    | TurnStarted
    | ReplyDelta
    | TurnDone
    | TurnError
    | TopicCreated
    | TopicUpdated
    | TopicDeleted
    | SessionDeleted
    | ErrorEvent
)


def session_group(session_id: int) -> str:
    """The channel-layer group of a session's websocket clients."""
    return f"session-{session_id}"


def topic_payload(topic) -> TopicPayload:
    """A topic as events (and the REST API) show it."""
    return topic_representation(topic)  # type: ignore[return-value]


def topic_deleted(topic_id: int) -> TopicDeleted:
    return {"type": "topic.deleted", "topic_id": topic_id}


def session_deleted(session_id: int) -> SessionDeleted:
    return {"type": "session.deleted", "session_id": session_id}


def message_payload(message) -> MessagePayload:
    """A message as events (and the REST API) show it."""
    return message_representation(message)  # type: ignore[return-value]


def message_created(message) -> MessageCreated:
    return {"type": "message.created", "message": message_payload(message)}


def turn_started(turn_id: str, *, user_message_id: int) -> TurnStarted:
    return {"type": "turn.started", "turn_id": turn_id, "user_message_id": user_message_id}


def reply_delta(turn_id: str, delta: str) -> ReplyDelta:
    return {"type": "reply.delta", "turn_id": turn_id, "delta": delta}


def turn_done(turn_id: str, *, reply_message_id: int | None, ok: bool) -> TurnDone:
    return {"type": "turn.done", "turn_id": turn_id, "reply_message_id": reply_message_id, "ok": ok}


def turn_error(turn_id: str, error: str) -> TurnError:
    """Every failed turn can be retried: the user's message is stored."""
    return {"type": "turn.error", "turn_id": turn_id, "error": error, "retryable": True}


def topic_created(*, topic, previous, relocated_message_ids: list[int]) -> TopicCreated:
    return {
        "type": "topic.created",
        "topic": topic_payload(topic),
        "previous": topic_payload(previous) if previous is not None else None,
        "relocated_message_ids": list(relocated_message_ids),
    }


def topic_updated(topic, *, reason: Literal["summary", "refresh", "curation"]) -> TopicUpdated:
    return {"type": "topic.updated", "topic": topic_payload(topic), "reason": reason}


def error_event(code: str, message: str) -> ErrorEvent:
    """A refused frame, for the socket that sent it (never published to the group)."""
    return {"type": "error", "code": code, "message": message}


def publish(session_id: int, event: Event) -> None:
    """Send now (or with the other events of this moment, inside :func:`outbox`). Use for
    ephemeral events (reply deltas) that carry no stored state.

    Best effort (memory/lib/outage.py): a dead channel layer never fails the write that
    happened, and is skipped for a moment after it failed."""
    box = getattr(_outboxes, "box", None)
    if box is not None and box.session_id == session_id:
        box.events.append(event)
        if event["type"] == "reply.delta":  # streaming: never held back
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
    if not channel_breaker.allows():
        return
    try:
        with channel_breaker.watch():
            group_send_from_thread(
                get_channel_layer(),
                session_group(session_id),
                {"type": "session.events", "events": events},
            )
    except Exception:
        logger.debug("could not publish %s to session %s", [e["type"] for e in events], session_id)


def publish_on_commit(session_id: int, event: Event) -> None:
    """Send once the current transaction commits, so clients never see unsaved state."""
    transaction.on_commit(lambda: publish(session_id, event))
