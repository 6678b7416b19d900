"""What a turn's context reads of its session, in one statement: the active topic and the
earlier ones worth showing, in order; the active topic's row also carries its active
notes, the scope's durable facts and the session's drift result, which the pipeline may
have written since in another process (``notes_text``, ``facts``, ``provenance``,
``drift``). Each earlier topic has the days of its conversation (``first_at``,
``last_at``: memory/stores/persistent.py ``topic_days``); the active topic has its own
date there, since its long thread is not read.

On PostgreSQL the statement is written out, not built by the ORM: building and compiling
it cost a turn more CPU than running it (issue 43: the ORM's build about 40 % of it, its
compile the rest, every turn). Elsewhere (SQLite, whose drivers give dates and booleans of
an expression untyped) the ORM builds it; both give the same rows (tests/test_context.py).
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Case, F, JSONField, OuterRef, Q, Subquery, TextField, When

from memory.models import ImportantInfo, Message, Notes, Session, Topic
from memory.stores.persistent import topic_days_annotation

FIELDS = (
    "pk",
    "title",
    "summary",
    "deprecated",
    "is_active",
    "first_at",
    "last_at",
    "notes_text",
    "facts",
    "provenance",
    "drift",
)

# ``FIELDS`` in order. The parameters: the facts' scope (user, agent, organization), the
# session. A topic's first and last messages (error records left out) are each one row of
# the ``(topic, -seq)`` index; a topic has at most one active notes document, a scope one
# facts document (their unique constraints).
_SQL = f"""
SELECT t.id, t.title, t.summary, t.deprecated, t.is_active,
    CASE WHEN t.is_active THEN t.created_at ELSE coalesce(
        (SELECT m.created_at FROM memory_message AS m
            WHERE m.topic_id = t.id AND m.role <> '{Message.Role.ERROR.value}'
            ORDER BY m.seq ASC LIMIT 1),
        t.created_at) END,
    CASE WHEN t.is_active THEN t.created_at ELSE coalesce(
        (SELECT m.created_at FROM memory_message AS m
            WHERE m.topic_id = t.id AND m.role <> '{Message.Role.ERROR.value}'
            ORDER BY m.seq DESC LIMIT 1),
        t.created_at) END,
    CASE WHEN t.is_active THEN
        (SELECT n.content FROM memory_notes AS n WHERE n.topic_id = t.id AND NOT n.archived)
    END,
    f.data, f.provenance,
    CASE WHEN t.is_active THEN s.drift_result END
FROM memory_topic AS t
JOIN memory_session AS s ON s.id = t.session_id
LEFT JOIN memory_importantinfo AS f
    ON t.is_active AND f.user_id = %s AND f.agent_id = %s AND f.organization_id = %s
WHERE t.session_id = %s AND (t.is_active OR t.summary <> '' OR t.deprecated)
ORDER BY t.created_at, t.id"""


def session_topics(session: Session) -> tuple[dict, list[dict]]:
    """The session's active topic and its earlier ones worth showing (a summary, or
    deprecated), oldest first, as ``FIELDS`` dicts (see the module's docstring)."""
    rows = _rows(session) if connection.vendor == "postgresql" else orm_rows(session)
    active = next((row for row in rows if row["is_active"]), None)
    if active is None:
        raise Topic.DoesNotExist(f"session {session.pk} has no active topic")
    return active, [row for row in rows if not row["is_active"]]


def _rows(session: Session) -> list[dict]:
    scope = (session.user_id, session.agent_id, session.agent.organization_id)
    with connection.cursor() as cursor:
        cursor.execute(_SQL, [*scope, session.pk])
        rows = [dict(zip(FIELDS, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:  # jsonb comes as text (Django's loader), for its fields to decode
        for name, field in _JSON.items():
            row[name] = field.from_db_value(row[name], None, connection)
    return rows


_JSON = {  # the rows' JSON values, by the model fields they are read from
    "facts": ImportantInfo._meta.get_field("data"),
    "provenance": ImportantInfo._meta.get_field("provenance"),
}


def orm_rows(session: Session) -> list[dict]:
    """The rows of ``session_topics``, built by the ORM."""

    def on_active(query, field) -> Case:  # read for the active topic's row only
        return Case(When(is_active=True, then=Subquery(query)), default=None, output_field=field)

    facts = ImportantInfo.objects.filter(
        user_id=session.user_id,
        agent_id=session.agent_id,
        organization_id=session.agent.organization_id,
    )
    notes = Notes.objects.active().filter(topic_id=OuterRef("pk")).values("content")[:1]
    return list(
        Topic.objects.filter(session_id=session.pk)
        .filter(Q(is_active=True) | ~Q(summary="") | Q(deprecated=True))
        .annotate(
            **topic_days_annotation(active=False),
            notes_text=on_active(notes, TextField()),
            facts=on_active(facts.values("data")[:1], JSONField()),
            provenance=on_active(facts.values("provenance")[:1], JSONField()),
            drift=Case(When(is_active=True, then=F("session__drift_result"))),
        )
        .order_by("created_at", "pk")
        .values(*FIELDS)
    )
