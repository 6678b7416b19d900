"""Lookups that only ever find the caller's own rows: anyone else's id is a 404."""

from django.shortcuts import get_object_or_404

from memory.models import Session, Topic


def owned_session_or_404(user, session_id: int) -> Session:
    return get_object_or_404(
        Session.objects.owned_by(user).select_related("agent", "organization"), pk=session_id
    )


def owned_topic_or_404(user, topic_id: int) -> Topic:
    return get_object_or_404(Topic.objects.owned_by(user).select_related("session"), pk=topic_id)
