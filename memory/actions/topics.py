"""Closing a topic, and a new topic started by the user.

A topic closes in one way, whoever closes it (the user's new topic here, a drift fork in
memory/actions/fork.py): its summary is applied, then its notes are archived (only once
the summary exists, since it is made from them), then it stops being the active topic.
Closing one line of work and starting the next are a single step from memory's point of
view: one transaction, under the session row lock that every message append takes first,
and no model call runs under that lock.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.actions.summarize import (
    PreparedSummary,
    TopicSummary,
    apply_summary,
    confirm_summary,
    prepare_summary,
    publish_topic_updated,
    topic_history,
    with_fresh_summary,
)
from memory.events import publish_on_commit, topic_created, topic_updated
from memory.models import Notes, Session, Topic
from memory.stores.leases import session_lock


def close_topic(topic: Topic, *, summary: TopicSummary | None, evaluated_through: int) -> None:
    """Close ``topic`` (locked by the caller, in its transaction): apply its summary (None:
    a topic with nothing to summarize), archive its notes, mark it evaluated through
    ``evaluated_through`` and no longer active. The caller makes the next topic active."""
    if summary is not None:
        apply_summary(topic=topic, summary=summary)
    Notes.objects.filter(topic=topic).archive()  # only now that the summary exists
    topic.is_active = False
    topic.closed_at = timezone.now()
    topic.evaluated_through_seq = max(topic.evaluated_through_seq, evaluated_through)
    topic.save(update_fields=["is_active", "closed_at", "evaluated_through_seq"])
    if summary is not None:
        publish_topic_updated(topic, reason="summary")


def do_new_topic(*, session: Session) -> Topic:
    """Close the active topic (summarized, notes archived) and start a new active one,
    never during a turn of the session (the session lock, memory/stores/leases.py: it
    raises TurnBusy when a turn is running).

    The summary call is made before the row lock is taken; inside it, the summary is used
    only if the topic's messages and notes are still the ones summarized (otherwise the
    lock is released and it is made again: no model call ever runs under the lock). A
    prior topic without messages is closed without a summary, since there is nothing to
    summarize. The drift result is cleared: it spoke of the topic that just closed.
    """
    with session_lock(session.pk):
        return with_fresh_summary(
            lambda: _prepare_closing(session.pk),
            lambda prepared, accept_stale: _start_locked(
                session=session, prepared=prepared, accept_stale=accept_stale
            ),
        )


def _start_locked(
    *, session: Session, prepared: PreparedSummary | None, accept_stale: bool
) -> Topic:
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).get()
        prior = _close_active(session.pk, prepared=prepared, accept_stale=accept_stale)
        topic = Topic.objects.create(session_id=session.pk, origin=Topic.Origin.USER)
        Session.objects.filter(pk=session.pk).exclude(drift_result="").update(drift_result="")
        publish_on_commit(
            session.pk, topic_created(topic=topic, previous=prior, relocated_message_ids=[])
        )
    return topic


def _prepare_closing(session_id: int, *, unless: int | None = None) -> PreparedSummary | None:
    """The summary of the session's active topic, prepared before its lock (none when the
    topic is ``unless``, the one being resumed, or holds nothing to summarize)."""
    current = Topic.objects.filter(session_id=session_id, is_active=True).first()
    if current is None or current.pk == unless or not topic_history(current):
        return None
    return prepare_summary(topic=current)


def _close_active(
    session_id: int, *, prepared: PreparedSummary | None, accept_stale: bool
) -> Topic | None:
    """Close the session's active topic, if any, as a new topic closes it: its summary
    confirmed (or refreshed), its notes archived. Inside the caller's transaction, with
    the session's row locked. Returns the topic closed."""
    prior = (
        Topic.objects.select_for_update(of=("self",))
        .select_related("session")
        .filter(session_id=session_id, is_active=True)
        .first()
    )
    if prior is not None:
        history = topic_history(prior)
        summary = None
        if history:
            summary = confirm_summary(prepared, topic=prior, accept_stale=accept_stale)
        close_topic(
            prior,
            summary=summary,
            evaluated_through=history[-1].seq if history else prior.evaluated_through_seq,
        )
    return prior


def do_resume_topic(*, topic: Topic) -> Topic:
    """Make an earlier topic of its session the active one again (the user's "Resume"
    from its reading banner): the active topic is closed as a new topic would close it
    (summarized, notes archived), then ``topic`` is active, its closing undone, and the
    next message goes to it. Never during a turn of the session (TurnBusy). Resuming the
    active topic changes nothing."""
    session = topic.session

    with session_lock(session.pk):
        return with_fresh_summary(
            lambda: _prepare_closing(session.pk, unless=topic.pk),
            lambda prepared, accept_stale: _resume_locked(
                topic, prepared=prepared, accept_stale=accept_stale
            ),
        )


def _resume_locked(topic: Topic, *, prepared: PreparedSummary | None, accept_stale: bool) -> Topic:
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=topic.session_id).get()
        locked = Topic.objects.select_for_update(of=("self",)).select_related("session")
        topic = locked.get(pk=topic.pk)
        if topic.is_active:
            return topic
        prior = _close_active(topic.session_id, prepared=prepared, accept_stale=accept_stale)
        if prior is not None:
            publish_on_commit(topic.session_id, topic_updated(prior, reason="resumed"))
        topic.is_active = True
        topic.closed_at = None
        topic.save(update_fields=["is_active", "closed_at"])
        Session.objects.filter(pk=topic.session_id).exclude(drift_result="").update(drift_result="")
        publish_on_commit(topic.session_id, topic_updated(topic, reason="resumed"))
    return topic
