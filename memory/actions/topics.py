"""A new topic started by the user.

The prior topic is summarized before the new one becomes active, and its notes are
archived only after that summary exists: closing one line of work and starting the next
are a single step from memory's point of view (one transaction, under the session row
lock that every message append takes first), and no model call runs under that lock.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.actions.summarize import (
    PreparedSummary,
    apply_summary,
    confirm_summary,
    prepare_summary,
    publish_topic_updated,
    topic_history,
    with_fresh_summary,
)
from memory.events import publish_on_commit, topic_created
from memory.models import Notes, Session, Topic


def do_start_user_topic(*, session: Session) -> Topic:
    """Close the active topic (summarized, notes archived) and start a new active one.

    The summary call is made before the lock is taken; inside it, the summary is used
    only if the topic's messages and notes are still the ones summarized (otherwise the
    lock is released and it is made again: no model call ever runs under the lock). A
    prior topic without messages is closed without a summary, since there is nothing to
    summarize. The drift result is cleared: it spoke of the topic that just closed.
    """

    def prepare() -> PreparedSummary | None:
        current = Topic.objects.filter(session_id=session.pk, is_active=True).first()
        if current is None or not topic_history(current):
            return None
        return prepare_summary(topic=current)

    return with_fresh_summary(
        prepare,
        lambda prepared, accept_stale: _start_locked(
            session=session, prepared=prepared, accept_stale=accept_stale
        ),
    )


def _start_locked(
    *, session: Session, prepared: PreparedSummary | None, accept_stale: bool
) -> Topic:
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).get()
        prior = (
            Topic.objects.select_for_update(of=("self",))
            .select_related("session")
            .filter(session_id=session.pk, is_active=True)
            .first()
        )
        if prior is not None:
            history = topic_history(prior)
            if history:
                summary = confirm_summary(prepared, topic=prior, accept_stale=accept_stale)
                apply_summary(topic=prior, summary=summary)
            Notes.objects.filter(topic=prior).archive()  # only now that the summary exists
            prior.is_active = False
            prior.closed_at = timezone.now()
            if history:
                prior.evaluated_through_seq = max(prior.evaluated_through_seq, history[-1].seq)
            prior.save(update_fields=["is_active", "closed_at", "evaluated_through_seq"])
            if history:
                publish_topic_updated(prior, reason="summary")
        topic = Topic.objects.create(session_id=session.pk, origin=Topic.Origin.USER)
        Session.objects.filter(pk=session.pk).exclude(drift_result="").update(drift_result="")
        publish_on_commit(
            session.pk, topic_created(topic=topic, previous=prior, relocated_message_ids=[])
        )
    return topic
