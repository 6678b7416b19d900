"""Small builders for memory-core tests: topics, threads and tool-call rounds, fast."""

from __future__ import annotations

import json
from datetime import timedelta

from django.db.models import F
from django.utils import timezone

from memory.models import Message, Session, Topic

_EPOCH = timezone.now() - timedelta(days=365)


def add_topic(
    session: Session,
    *,
    title: str,
    summary: str = "",
    keep: bool = False,
    deprecated: bool = False,
    age_days: int | None = None,
    messages: int = 0,
) -> Topic:
    """An earlier (inactive) topic of ``session`` with ``messages`` messages (only a topic
    with messages may enter memory); ``age_days`` orders memory entries."""
    in_memory = keep or deprecated
    changed_at = None
    if in_memory:
        changed_at = _EPOCH + timedelta(days=365 - (age_days if age_days is not None else 0))
    topic = Topic.objects.create(
        session=session,
        title=title,
        summary=summary,
        keep_in_memory=keep,
        deprecated=deprecated,
        memory_changed_at=changed_at,
        is_active=False,
        origin=Topic.Origin.USER,
    )
    if messages:
        add_messages(session, messages, topic=topic, prefix=f"{title}: ")
    return topic


def add_messages(
    session: Session, count: int, *, topic: Topic | None = None, prefix: str = "m"
) -> list[Message]:
    """``count`` alternating user/assistant messages at the end of the session."""
    topic = topic or session.active_topic()
    start = _reserve(session, count, conversation=count)
    return Message.objects.bulk_create(
        Message(
            session=session,
            topic=topic,
            seq=start + i,
            role=Message.Role.USER if i % 2 == 0 else Message.Role.ASSISTANT,
            content=f"{prefix}{start + i}",
        )
        for i in range(count)
    )


def add_message(session: Session, role: str, content: str = "", **fields) -> Message:
    return session.append_message(role=role, content=content, **fields)


def add_tool_round(
    session: Session, names: list[str], *, answered: list[str] | None = None, tag: str = ""
) -> list[Message]:
    """An assistant message calling ``names`` and the results of ``answered`` (default all)."""
    ids = [f"call-{tag}{i}" for i in range(len(names))]
    calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        for call_id, name in zip(ids, names, strict=True)
    ]
    stored = [add_message(session, Message.Role.ASSISTANT, "", tool_calls=calls)]
    for call_id, name in zip(ids, names, strict=True):
        if answered is None or name in answered:
            stored.append(
                add_message(
                    session,
                    Message.Role.TOOL,
                    json.dumps({"ok": True, "tool": name}),
                    tool_call_id=call_id,
                    tool_name=name,
                )
            )
    return stored


def _reserve(session: Session, count: int, *, conversation: int) -> int:
    """Take ``count`` sequence numbers at once, ``conversation`` of them conversation
    messages (as ``Session.append_message`` counts them one by one)."""
    Session.objects.filter(pk=session.pk).update(
        message_count=F("message_count") + count,
        conversation_count=F("conversation_count") + conversation,
    )
    session.refresh_from_db(fields=["message_count", "conversation_count"])
    return session.message_count - count + 1


def assert_valid_openai_thread(messages: list[dict]) -> None:
    """What an OpenAI-compatible endpoint requires of tool calls and results."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, f"orphan tool result {message}"
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"tool calls {pending} have no result before {message}"
        assert message["role"] != "error"
        if message.get("tool_calls"):
            pending = {call["id"] for call in message["tool_calls"]}
            assert len(pending) == len(message["tool_calls"])
    assert not pending, f"tool calls {pending} have no result"
