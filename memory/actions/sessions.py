"""A session's own rows: starting one, renaming it.

The session's open sockets hear of a rename (``session.updated``), after the commit.
Callers check ownership and the title first (REST looks the session up through the
caller's own; chat/api/serializers.py checks the title).
"""

from __future__ import annotations

from django.db import transaction

from memory.events import publish_on_commit, session_updated
from memory.models import Agent, Session


def do_start_session(*, user, agent: Agent, title: str = "") -> Session:
    """A new session with its first, active topic (no socket listens to it yet)."""
    return Session.objects.start(user=user, agent=agent, title=title)


def do_rename_session(*, session: Session, title: str) -> None:
    """Give the session ``title`` (empty: it shows its main topic's title again)."""
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(title=title)
        publish_on_commit(session.pk, session_updated(session_id=session.pk, title=title))
