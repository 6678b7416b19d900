"""Export and import of one memory scope (agent, user, organization) as a JSON document.

The document (``docs/memory-export.md`` describes it field by field) carries the scope's
durable facts and the topics in memory (promoted or deprecated) grouped under their
sessions, and, on request, whole sessions with every topic and message. Nothing in it is
a database id: sessions and topics carry their ``uid``, so an import merges by those ids
(facts by key) and importing the same document twice changes nothing.

An import is checked whole before anything is written (``check_memory_document``) and
applied in one transaction, so a malformed or oversized document changes nothing.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.actions.tools import MAX_TOOL_RESULT_CHARS
from memory.lib.errors import Conflict, InvalidInput
from memory.lib.limits import MAX_JSON_DEPTH, MAX_MESSAGE_CHARS, MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from memory.lib.validation import check_json_value
from memory.models import ImportantInfo, Message, Session, Topic
from memory.stores.facts import (
    FactError,
    check_fact_key,
    check_fact_value,
    check_lookalike,
    import_facts,
)
from memory.stores.persistent import invalidate_persistent_memory

FORMAT = "driftless.memory"
VERSION = 1
# What one import may create (docs/memory-export.md): a larger history is imported as
# several documents, each a part of the sessions list (merging by uid makes that safe).
MAX_SESSIONS = 500
MAX_TOPICS = 5_000
MAX_MESSAGES = 50_000
MAX_FACTS = 1_000
# Text as every other interface takes it (memory/lib/limits.py); an assistant's reply is
# held to a user's message doubled, a tool result to what a tool may return.
MAX_CONTENT_CHARS = {
    "user": MAX_MESSAGE_CHARS,
    "assistant": 2 * MAX_MESSAGE_CHARS,
    "tool": MAX_TOOL_RESULT_CHARS,
}
MAX_OTHER_CONTENT_CHARS = 2_000  # system and error notes
MAX_TOOL_CALLS = 16  # calls in one assistant message
MAX_TOOL_CALLS_CHARS = 20_000  # the message's calls as compact JSON
# How deep the document may nest: a fact value or a tool call as deep as the API takes
# it, under the document's own levels.
IMPORT_JSON_DEPTH = MAX_JSON_DEPTH + 8
# A sequence number leaves room for the session to go on (a PostgreSQL integer).
MAX_SEQ = 10_000_000
# Dates from the Unix epoch to a day past the server's clock, stored in UTC.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)

_TOPIC_FLAGS = (
    "keep_in_memory",
    "keep_in_memory_manually_set",
    "deprecated",
    "deprecated_manually_set",
    "summary_manually_set",  # the title and summary are the user's correction
)
_TOPIC_DATES = ("created_at", "closed_at", "summarized_at", "memory_changed_at")


class ImportRefused(InvalidInput):
    """The document cannot be imported; the message names the field and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="document", code="invalid_document")


class ImportBusy(Conflict):
    """Another import into the same scope is running (a 409: nothing was changed)."""

    code = "import_in_progress"


@dataclass(frozen=True)
class ImportReport:
    facts: int
    facts_added: list[str]
    facts_changed: list[str]
    facts_skipped: list[str]  # held a newer value here (or the file carries no date)
    sessions_created: int
    topics_created: int
    topics_updated: int
    messages_created: int


# --- export -------------------------------------------------------------------------------


# Sessions read together when a whole-history export is streamed: what is held at once.
EXPORT_SESSIONS_AT_ONCE = 50


def export_memory(*, user, agent, include_sessions: bool = False) -> dict[str, Any]:
    """The scope's facts and memory topics; with ``include_sessions``, every session whole."""
    return {
        **export_header(user=user, agent=agent),
        "sessions": list(
            iter_exported_sessions(user=user, agent=agent, include_sessions=include_sessions)
        ),
    }


def export_header(*, user, agent) -> dict[str, Any]:
    """The document without its sessions: format, version, agent and facts."""
    facts = (
        ImportantInfo.objects.filter(user=user, agent=agent, organization_id=agent.organization_id)
        .values_list("data", flat=True)
        .first()
    )
    return {
        "format": FORMAT,
        "version": VERSION,
        "agent": agent.name,
        # An import compares it with each fact's last setting: never a newer value lowered.
        "exported_at": timezone.now().isoformat(),
        "facts": dict(sorted((facts or {}).items())),
    }


def iter_exported_sessions(*, user, agent, include_sessions: bool) -> Iterator[dict[str, Any]]:
    """The document's sessions one by one, read EXPORT_SESSIONS_AT_ONCE at a time, so a
    streamed export of a long history never holds it all (memory/actions/portability.py)."""
    sessions = Session.objects.in_scope(
        agent_id=agent.pk, user_id=user.pk, organization_id=agent.organization_id
    ).order_by("created_at", "uid")
    chunk: list[Session] = []
    for session in sessions.iterator(chunk_size=EXPORT_SESSIONS_AT_ONCE):
        chunk.append(session)
        if len(chunk) == EXPORT_SESSIONS_AT_ONCE:
            yield from _session_documents(chunk, include_sessions=include_sessions)
            chunk = []
    yield from _session_documents(chunk, include_sessions=include_sessions)


def _session_documents(sessions: list[Session], *, include_sessions: bool) -> Iterator[dict]:
    if not sessions:
        return
    topics = Topic.objects.filter(session__in=sessions).order_by("created_at", "uid")
    if not include_sessions:
        topics = topics.in_memory()
    topics = list(topics)
    messages = _messages_by_topic(topics) if include_sessions else {}
    by_session: dict[int, list[dict]] = {}
    for topic in topics:
        entry = topic_document(topic)
        if include_sessions:
            entry["messages"] = messages.get(topic.pk, [])
        by_session.setdefault(topic.session_id, []).append(entry)
    for session in sessions:
        if session.pk in by_session:
            yield {
                "uid": str(session.uid),
                "title": session.title,
                "created_at": _date(session.created_at),
                "topics": by_session[session.pk],
            }


def topic_document(topic: Topic) -> dict[str, Any]:
    return {
        "uid": str(topic.uid),
        "title": topic.title,
        "summary": topic.summary,
        **{flag: getattr(topic, flag) for flag in _TOPIC_FLAGS},
        "active": topic.is_active,
        "origin": topic.origin,
        **{name: _date(getattr(topic, name)) for name in _TOPIC_DATES},
    }


# A message as an export holds it, the fields in this order (the streamed export,
# memory/actions/export_text.py, reads these columns and writes the same record).
MESSAGE_FIELDS = (
    "seq",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "memory_trace",
    "versions",
    "created_at",
)


def message_document(values: dict[str, Any]) -> dict[str, Any]:
    """One message of an export from its ``MESSAGE_FIELDS`` values."""
    return {
        **values,
        "memory_trace": values["memory_trace"] or {},
        "versions": values["versions"] or [],
        "created_at": _date(values["created_at"]),
    }


def _messages_by_topic(topics) -> dict[int, list[dict]]:
    grouped: dict[int, list[dict]] = {}
    rows = Message.objects.filter(topic__in=topics).order_by("session_id", "seq")
    for topic_id, *values in rows.values_list("topic_id", *MESSAGE_FIELDS):
        grouped.setdefault(topic_id, []).append(
            message_document(dict(zip(MESSAGE_FIELDS, values, strict=True)))
        )
    return grouped


def _date(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# --- checking a document ------------------------------------------------------------------


def check_memory_document(document: object) -> dict[str, Any]:
    """The document with its dates parsed and facts normalised, or ImportRefused."""
    doc = _object(document, "document")
    if doc.get("format") != FORMAT:
        raise ImportRefused(f"format: expected {FORMAT!r}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise ImportRefused(f"version: expected {VERSION}; this server reads version {VERSION}")
    facts = _object(doc.get("facts", {}), "facts")
    if len(facts) > MAX_FACTS:
        raise ImportRefused(f"facts: at most {MAX_FACTS}")
    checked_facts: dict[str, Any] = {}
    for key, value in facts.items():
        _clean_json([key, value], f"facts[{key!r}]")
        try:
            new_key = check_fact_key(key)
            if new_key not in checked_facts:  # the same key twice: one after normalizing
                check_lookalike(checked_facts, new_key)
            checked_facts[new_key] = check_fact_value(value)
        except FactError as err:
            raise ImportRefused(f"facts[{key!r}]: {err}") from err
    sessions = _list(doc.get("sessions", []), "sessions", MAX_SESSIONS)
    seen: set[str] = set()
    budget = {"topics": MAX_TOPICS, "messages": MAX_MESSAGES}
    checked_sessions = [
        _check_session(item, f"sessions[{i}]", seen, budget) for i, item in enumerate(sessions)
    ]
    exported_at = _when(doc.get("exported_at"), "exported_at", required=False)
    return {"facts": checked_facts, "sessions": checked_sessions, "exported_at": exported_at}


def _spend(budget: dict[str, int], what: str, count: int, where: str) -> None:
    """Count ``count`` more topics or messages against what one import may create."""
    budget[what] -= count
    if budget[what] < 0:
        limit = MAX_TOPICS if what == "topics" else MAX_MESSAGES
        raise ImportRefused(
            f"{where}: one import holds at most {limit} {what}; import the sessions in parts"
        )


def _check_session(item: object, where: str, seen: set[str], budget: dict) -> dict[str, Any]:
    session = _object(item, where)
    topics = _list(session.get("topics"), f"{where}.topics", MAX_TOPICS)
    _spend(budget, "topics", len(topics), f"{where}.topics")
    checked = {
        "uid": _uid(session.get("uid"), f"{where}.uid", seen),
        "title": _text(session.get("title"), f"{where}.title", MAX_TITLE_CHARS),
        "created_at": _when(session.get("created_at"), f"{where}.created_at", required=True),
        "topics": [
            _check_topic(t, f"{where}.topics[{i}]", seen, budget) for i, t in enumerate(topics)
        ],
    }
    if sum(topic["active"] for topic in checked["topics"]) > 1:
        raise ImportRefused(f"{where}.topics: at most one topic is active")
    seqs = [m["seq"] for topic in checked["topics"] for m in topic["messages"] or []]
    if len(seqs) != len(set(seqs)):
        raise ImportRefused(f"{where}: two messages share a sequence number")
    return checked


def _check_topic(item: object, where: str, seen: set[str], budget: dict) -> dict[str, Any]:
    topic = _object(item, where)
    checked: dict[str, Any] = {
        "uid": _uid(topic.get("uid"), f"{where}.uid", seen),
        "title": _text(topic.get("title"), f"{where}.title", MAX_TITLE_CHARS),
        "summary": _text(topic.get("summary"), f"{where}.summary", MAX_SUMMARY_CHARS),
        "active": _bool(topic.get("active", False), f"{where}.active"),
        "origin": _choice(topic.get("origin", "user"), f"{where}.origin", Topic.Origin.values),
    }
    for flag in _TOPIC_FLAGS:
        checked[flag] = _bool(topic.get(flag, False), f"{where}.{flag}")
    for name in _TOPIC_DATES:
        checked[name] = _when(topic.get(name), f"{where}.{name}", required=name == "created_at")
    messages = topic.get("messages")
    checked["messages"] = None
    if messages is not None:
        items = _list(messages, f"{where}.messages", MAX_MESSAGES)
        _spend(budget, "messages", len(items), f"{where}.messages")
        checked["messages"] = [
            _check_message(m, f"{where}.messages[{i}]") for i, m in enumerate(items)
        ]
    return checked


def _check_message(item: object, where: str) -> dict[str, Any]:
    message = _object(item, where)
    seq = message.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ:
        raise ImportRefused(f"{where}.seq: expected a whole number from 1 to {MAX_SEQ}")
    role = _choice(message.get("role"), f"{where}.role", Message.Role.values)
    tool_calls = _tool_calls(message.get("tool_calls", []), f"{where}.tool_calls")
    limit = MAX_CONTENT_CHARS.get(role, MAX_OTHER_CONTENT_CHARS)
    return {
        "seq": seq,
        "role": role,
        "content": _text(message.get("content"), f"{where}.content", limit),
        "tool_calls": tool_calls,
        "tool_call_id": _text(message.get("tool_call_id", ""), f"{where}.tool_call_id", 200),
        "tool_name": _text(message.get("tool_name", ""), f"{where}.tool_name", 200),
        "created_at": _when(message.get("created_at"), f"{where}.created_at", required=True),
    }


def _tool_calls(value: object, where: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise ImportRefused(f"{where}: expected a list of objects")
    if len(value) > MAX_TOOL_CALLS:
        raise ImportRefused(f"{where}: at most {MAX_TOOL_CALLS} calls in one message")
    try:
        check_json_value(value, field=where)
    except InvalidInput as err:
        raise ImportRefused(err.message) from err
    if len(json.dumps(value, separators=(",", ":"))) > MAX_TOOL_CALLS_CHARS:
        raise ImportRefused(f"{where}: at most {MAX_TOOL_CALLS_CHARS} characters as JSON")
    return value


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ImportRefused(f"{where}: expected an object")
    return value


def _list(value: object, where: str, limit: int) -> list:
    if not isinstance(value, list):
        raise ImportRefused(f"{where}: expected a list")
    if len(value) > limit:
        raise ImportRefused(f"{where}: at most {limit} items")
    return value


def _text(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ImportRefused(f"{where}: expected text")
    if len(value) > limit:
        raise ImportRefused(f"{where}: at most {limit} characters")
    _clean_json(value, where)
    return value


def _clean_json(value: object, where: str) -> None:
    """No NUL and no lone surrogate anywhere (the database cannot store them)."""
    if isinstance(value, str):
        if "\x00" in value or any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
            raise ImportRefused(f"{where}: contains a NUL or an unpaired surrogate")
    elif isinstance(value, dict):
        for key, item in value.items():
            _clean_json(key, where)
            _clean_json(item, where)
    elif isinstance(value, list):
        for item in value:
            _clean_json(item, where)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ImportRefused(f"{where}: expected true or false")
    return value


def _choice(value: object, where: str, choices: list[str]) -> str:
    if value not in choices or not isinstance(value, str):
        raise ImportRefused(f"{where}: expected one of {', '.join(choices)}")
    return value


def _uid(value: object, where: str, seen: set[str]) -> uuid.UUID:
    try:
        uid = uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        uid = None
    if uid is None:
        raise ImportRefused(f"{where}: expected a UUID")
    if str(uid) in seen:
        raise ImportRefused(f"{where}: {uid} appears twice in the document")
    seen.add(str(uid))
    return uid


def _when(value: object, where: str, *, required: bool) -> datetime | None:
    if value is None and not required:
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well-formed but not a date (month 13)
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ImportRefused(f"{where}: expected an ISO 8601 date and time with its offset")
    latest = timezone.now() + FUTURE_SLACK
    try:
        in_utc = parsed.astimezone(UTC)  # 9999-12-31T23:59:59-14:00 is past year 9999
    except OverflowError:
        in_utc = None
    if in_utc is None or not EARLIEST <= in_utc <= latest:
        raise ImportRefused(
            f"{where}: {value} is out of range; expected a date from "
            f"{EARLIEST.date().isoformat()} to {latest.date().isoformat()}"
        )
    return in_utc


# --- import ---------------------------------------------------------------------------------


def import_memory(*, user, agent, document: object) -> ImportReport:
    """Merge a document into the scope of ``user`` and ``agent``: all of it, or nothing."""
    doc = check_memory_document(document)
    scope = {"agent_id": agent.pk, "user_id": user.pk, "organization_id": agent.organization_id}
    counts: dict[str, Any] = {
        "facts_added": [],
        "facts_changed": [],
        "facts_skipped": [],
        "sessions_created": 0,
        "topics_created": 0,
        "topics_updated": 0,
        "messages_created": 0,
    }
    try:
        with transaction.atomic():
            _lock_scope(scope)
            _apply(doc, user=user, agent=agent, scope=scope, counts=counts)
    except IntegrityError as err:  # a concurrent import created the same session first
        raise ImportBusy("another import of these sessions ran at the same time") from err
    return ImportReport(facts=len(doc["facts"]), **counts)


def _lock_scope(scope: dict) -> None:
    """One import per scope at a time: a second one is refused (409), never queued."""
    if connection.vendor != "postgresql":
        return
    key = zlib.crc32("import:{agent_id}:{user_id}:{organization_id}".format(**scope).encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [0x1D7, key - 2**31])
        if not cursor.fetchone()[0]:
            raise ImportBusy("another import into this memory is running; try again after it")


def _apply(doc: dict, *, user, agent, scope: dict, counts: dict) -> None:
    if doc["facts"]:
        try:  # the scope's key rules and limits hold for an import too (docs/limits.md)
            facts = import_facts(
                user=user, agent=agent, facts=doc["facts"], as_of=doc["exported_at"]
            )
        except FactError as err:
            raise ImportRefused(f"facts: {err}") from err
        for kind in ("added", "changed", "skipped"):
            counts[f"facts_{kind}"] = facts[kind]
    for session_doc in doc["sessions"]:
        _import_session(session_doc, scope=scope, counts=counts)
    invalidate_persistent_memory(f"{agent.pk}:{user.pk}:{agent.organization_id}")


def _import_session(doc: dict, *, scope: dict, counts: dict) -> None:
    session = Session.objects.filter(uid=doc["uid"], **scope).first()
    created = session is None
    if created:
        session = Session.objects.create(uid=doc["uid"], title=doc["title"], **scope)
        _set_dates(Session, session.pk, created_at=doc["created_at"])
        counts["sessions_created"] += 1
    in_scope = Topic.objects.in_scope(**scope)
    existing = {t.uid: t for t in in_scope.filter(uid__in=[t["uid"] for t in doc["topics"]])}
    for topic_doc in doc["topics"]:
        topic = existing.get(topic_doc["uid"])
        if topic is None:
            topic = _create_topic(topic_doc, session=session, fresh_session=created)
            counts["topics_created"] += 1
            if created and topic_doc["messages"]:
                counts["messages_created"] += _create_messages(topic, topic_doc["messages"])
        elif _update_topic(topic, topic_doc):
            counts["topics_updated"] += 1
        if topic.summary_manually_set:
            # The correction covers the topic's messages as imported (memory/actions/curation.py).
            Topic.objects.filter(pk=topic.pk).update(summarized_through_seq=topic.last_seq())
    if not session.topics.filter(is_active=True).exists():
        # Every session has one active topic; a memory-only session gets an empty one.
        Topic.objects.create(session=session, origin=Topic.Origin.USER)
    if created:
        messages = Message.objects.filter(session=session)
        last = messages.order_by("-seq").first()
        Session.objects.filter(pk=session.pk).update(
            message_count=last.seq if last else 0,
            conversation_count=messages.conversation().count(),
        )


def _topic_fields(doc: dict) -> dict[str, Any]:
    return {
        "title": doc["title"],
        "summary": doc["summary"],
        **{flag: doc[flag] for flag in _TOPIC_FLAGS},
        "closed_at": doc["closed_at"],
        "summarized_at": doc["summarized_at"],
        "memory_changed_at": doc["memory_changed_at"],
    }


def _create_topic(doc: dict, *, session: Session, fresh_session: bool) -> Topic:
    # Into an existing session an imported topic is always a closed one: that session
    # already has its active topic.
    topic = Topic.objects.create(
        session=session,
        uid=doc["uid"],
        origin=doc["origin"],
        is_active=doc["active"] and fresh_session,
        **_topic_fields(doc),
    )
    _set_dates(Topic, topic.pk, created_at=doc["created_at"])
    return topic


def _update_topic(topic: Topic, doc: dict) -> bool:
    fields = _topic_fields(doc)
    changed = [name for name, value in fields.items() if getattr(topic, name) != value]
    for name in changed:
        setattr(topic, name, fields[name])
    if changed:
        topic.save(update_fields=changed)
    return bool(changed)


def _create_messages(topic: Topic, messages: list[dict]) -> int:
    rows = Message.objects.bulk_create(
        Message(session_id=topic.session_id, topic=topic, **message) for message in messages
    )
    # bulk_create stamped them now (auto_now_add); bulk_update writes the dates as given.
    for row, message in zip(rows, messages, strict=True):
        row.created_at = message["created_at"]
    Message.objects.bulk_update(rows, ["created_at"], batch_size=1000)
    return len(rows)


def _set_dates(model: type[models.Model], pk: int, **dates: datetime) -> None:
    """``auto_now_add`` overrides a given creation date, so it is set after the insert."""
    model.objects.filter(pk=pk).update(**dates)
