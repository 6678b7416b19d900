"""Every event the server sends to a session's websocket clients, defined once.

Producers (the agent turn, the evaluation pipeline, curation) build events with these
types and publish them with :func:`publish_on_commit`; the websocket consumer forwards
them unchanged as JSON frames. ``docs/websocket.md`` shows one example of each.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from memory.outage import channel_breaker

logger = logging.getLogger(__name__)


class TopicPayload(TypedDict):
    id: int
    title: str
    summary: str
    memory_state: Literal["none", "promoted", "deprecated"]
    keep_in_memory_manually_set: bool
    deprecated_manually_set: bool
    summary_manually_set: bool
    is_active: bool
    origin: str


class MessagePayload(TypedDict):
    id: int
    seq: int
    topic_id: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    tool_name: str


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
    return {
        "id": topic.pk,
        "title": topic.title,
        "summary": topic.summary,
        "memory_state": topic.memory_state.value,
        "keep_in_memory_manually_set": topic.keep_in_memory_manually_set,
        "deprecated_manually_set": topic.deprecated_manually_set,
        "summary_manually_set": topic.summary_manually_set,
        "is_active": topic.is_active,
        "origin": topic.origin,
    }


def topic_deleted(topic_id: int) -> TopicDeleted:
    return {"type": "topic.deleted", "topic_id": topic_id}


def session_deleted(session_id: int) -> SessionDeleted:
    return {"type": "session.deleted", "session_id": session_id}


def message_payload(message) -> MessagePayload:
    return {
        "id": message.pk,
        "seq": message.seq,
        "topic_id": message.topic_id,
        "role": message.role,
        "content": message.content,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
    }


def publish(session_id: int, event: Event) -> None:
    """Send now. Use for ephemeral events (reply deltas) that carry no stored state.

    Best effort (memory/outage.py): a dead channel layer never fails the write that
    happened, and is skipped for a moment after it failed."""
    if not channel_breaker.allows():
        return
    try:
        with channel_breaker.watch():
            async_to_sync(get_channel_layer().group_send)(
                session_group(session_id), {"type": "session.event", "event": event}
            )
    except Exception:
        logger.debug("could not publish %s to session %s", event["type"], session_id)


def publish_on_commit(session_id: int, event: Event) -> None:
    """Send once the current transaction commits, so clients never see unsaved state."""
    transaction.on_commit(lambda: publish(session_id, event))
