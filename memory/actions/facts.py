"""Durable facts written by the user through a session (the Facts tab, REST).

The rules of a fact (its key and value, the limits, who may overwrite whom, the history)
are memory/stores/facts.py's, defined once; these actions are the writes an interface
calls, and tell the session's open sockets (``fact.changed``) after the commit. The reads
an interface needs are named here too, so that ``chat`` never imports the store
(pyproject.toml's import contracts).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.events import fact_changed, publish_on_commit
from memory.models import Session
from memory.stores.facts import (
    check_fact_key,
    check_fact_value,
    find_fact_key,
    read_fact,
    read_facts_with_provenance,
    set_fact,
    unset_fact,
)

__all__ = [
    "check_fact_value",
    "do_set_fact",
    "do_unset_fact",
    "read_fact",
    "read_facts_with_provenance",
]


def do_set_fact(
    *, session: Session, key: str, value: Any, actor: str, by=None, topic_id: int | None = None
) -> dict:
    """Create or change one fact of the session's scope as ``actor``; returns the whole
    document after the change (memory/stores/facts.py ``set_fact``: a refused key or value
    raises, the agent may not overwrite the user)."""
    with transaction.atomic():
        data = set_fact(
            user=session.user,
            agent=session.agent,
            key=key,
            value=value,
            actor=actor,
            by=by,
            topic_id=topic_id,
        )
        stored = find_fact_key(data, check_fact_key(key)) or key
        publish_on_commit(session.pk, fact_changed(key=stored, removed=False))
    return data


def do_unset_fact(
    *, session: Session, key: str, actor: str, by=None, topic_id: int | None = None
) -> bool:
    """Remove one fact of the session's scope as ``actor``; False (and no event) when
    there was none under that key."""
    with transaction.atomic():
        removed = unset_fact(
            user=session.user,
            agent=session.agent,
            key=key,
            actor=actor,
            by=by,
            topic_id=topic_id,
        )
        if removed:
            publish_on_commit(session.pk, fact_changed(key=key, removed=True))
    return removed
