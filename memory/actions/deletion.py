"""Deleting a session or a topic: permanent, audited without the content.

A deleted session takes its topics, messages and notes with it; a deleted topic takes its
messages and notes (the active topic cannot be deleted: a session always has one). What
was in persistent memory leaves it: the scope's cache is invalidated. One ``Deletion``
row remains for each deletion (who, what, how much, never a title or a message), and the
titles of the deleted topics are blanked in the curation audit trail, whose rows stay.

The session's open sockets hear of it (``topic.deleted``, ``session.deleted``: the server
then closes them). Callers check ownership first (REST and pages look rows up through
the caller's own); ``via`` says who asked: the user (page or API) or an operator (admin).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count

from memory.events import publish_on_commit, session_deleted, topic_deleted
from memory.lib.errors import ACTIVE_TOPIC_DELETE_ERROR, Conflict
from memory.models import IN_MEMORY, Deletion, MemoryDecision, Message, Session, Topic
from memory.stores.leases import session_lock
from memory.stores.messages import forget_recalled_blocks
from memory.stores.persistent import invalidate_persistent_memory


class DeletionRefused(Conflict):
    """The deletion cannot be made (the active topic); the message says why."""

    code = "active_topic"


def check_topic_deletion(*, topic: Topic) -> None:
    if topic.is_active:
        raise DeletionRefused(ACTIVE_TOPIC_DELETE_ERROR)


def do_delete_session(*, session: Session, deleted_by, via: str = Deletion.Via.USER) -> Deletion:
    """Delete the session and everything in it; returns the audit row. Never in the middle
    of one of its turns: whoever asks (the user's page or API, an operator in admin) waits
    for the session lock like a message does, and gets TurnBusy when the turn goes on."""
    with session_lock(session.pk), transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session.pk)
        topics = Topic.objects.filter(session_id=session.pk)
        counts = topics.aggregate(topics=Count("pk"), memory=Count("pk", filter=IN_MEMORY))
        record = _record(
            session,
            kind=Deletion.Kind.SESSION,
            via=via,
            deleted_by=deleted_by,
            topics=counts["topics"],
            messages=Message.objects.filter(session_id=session.pk).count(),
            memory_topics=counts["memory"],
        )
        _forget_titles(topics)
        forget_recalled_blocks(session_id=session.pk)  # other sessions may quote this one
        session_id = session.pk
        session.delete()
        invalidate_persistent_memory(session.memory_scope_key)
        publish_on_commit(session_id, session_deleted(session_id))
    return record


def do_delete_topic(*, topic: Topic, deleted_by, via: str = Deletion.Via.USER) -> Deletion:
    """Delete one topic that is not the active one; returns the audit row."""
    with transaction.atomic():
        # The session row first, as every message append does: no message lands in the
        # topic while it goes, and the active topic cannot change under the check.
        session = Session.objects.select_for_update().get(pk=topic.session_id)
        topic = Topic.objects.select_for_update().get(pk=topic.pk)
        check_topic_deletion(topic=topic)
        in_memory = topic.in_memory
        record = _record(
            session,
            kind=Deletion.Kind.TOPIC,
            via=via,
            deleted_by=deleted_by,
            topic_ref=topic.pk,
            topics=1,
            messages=topic.messages.count(),
            memory_topics=int(in_memory),
        )
        _forget_titles(Topic.objects.filter(pk=topic.pk))
        forget_recalled_blocks(session_id=session.pk)
        topic_id = topic.pk
        topic.delete()
        publish_on_commit(session.pk, topic_deleted(topic_id))
        if in_memory:
            invalidate_persistent_memory(session.memory_scope_key)
    return record


def _record(session: Session, **fields) -> Deletion:
    """The audit row: the session's scope and the counts, never its content."""
    return Deletion.objects.create(
        session_ref=session.pk,
        owner_id=session.user_id,
        agent_id=session.agent_id,
        organization_id=session.organization_id,
        **fields,
    )


def _forget_titles(topics) -> None:
    """The curation trail of deleted topics stays, without their titles."""
    MemoryDecision.objects.filter(topic__in=topics).update(topic_title="")
