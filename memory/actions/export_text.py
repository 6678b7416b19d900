"""A memory export as JSON text written while it is read (docs/memory-export.md).

The document is export_memory's (memory/actions/portability.py), key for key, but never
held whole: the sessions are read a few at a time, each topic's messages
``MESSAGES_AT_ONCE`` at a time through a database cursor, and each piece is written out
as soon as it is read. A 200,000-message session no longer makes a process grow by
hundreds of MiB (``python -m bench.export`` measures it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memory.actions.portability import (
    EXPORT_SESSIONS_AT_ONCE,
    MESSAGE_FIELDS,
    export_header,
    message_document,
    topic_document,
)
from memory.models import Message, Session, Topic

MESSAGES_AT_ONCE = 2_000


def _open(document: dict[str, Any], last: str) -> str:
    """``document`` as JSON, its last key's (empty) list left open for what follows."""
    text = json.dumps({**document, last: []}, ensure_ascii=False)
    return text.removesuffix("[]}") + "["


def export_text(*, user, agent, include_sessions: bool) -> Iterator[str]:
    """The export document as pieces of JSON text, in order."""
    yield _open(export_header(user=user, agent=agent), "sessions")
    sessions = Session.objects.in_scope(
        agent_id=agent.pk, user_id=user.pk, organization_id=agent.organization_id
    ).order_by("created_at", "uid")
    written = 0
    for session in sessions.iterator(chunk_size=EXPORT_SESSIONS_AT_ONCE):
        topics = Topic.objects.filter(session=session).order_by("created_at", "uid")
        if not include_sessions:
            topics = topics.in_memory()
        topics = list(topics)
        if not topics:
            continue
        head = {"uid": str(session.uid), "title": session.title}
        head["created_at"] = session.created_at.isoformat()
        yield (", " if written else "") + _open(head, "topics")
        written += 1
        for number, topic in enumerate(topics):
            yield from _topic_text(topic, first=number == 0, include_sessions=include_sessions)
        yield "]}"
    yield "]}"


def _topic_text(topic: Topic, *, first: bool, include_sessions: bool) -> Iterator[str]:
    separator = "" if first else ", "
    document = topic_document(topic)
    if not include_sessions:
        yield separator + json.dumps(document, ensure_ascii=False)
        return
    yield separator + _open(document, "messages")
    rows = (
        Message.objects.filter(topic=topic)
        .order_by("seq")
        .values_list(*MESSAGE_FIELDS)
        .iterator(chunk_size=MESSAGES_AT_ONCE)
    )
    for number, row in enumerate(rows):
        message = message_document(dict(zip(MESSAGE_FIELDS, row, strict=True)))
        yield ("" if number == 0 else ", ") + json.dumps(message, ensure_ascii=False)
    yield "]}"
