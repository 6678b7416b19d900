"""Curation: moving a topic between the three memory states.

The user may set any state and every change of theirs sets the matching manual flag.
The agent may promote, demote and deprecate until the user has taken a position; it can
never un-deprecate. The summarizer only sets keep-in-memory, never against the user.
Every accepted change writes an audit row, invalidates the persistent-memory cache of
the scope and tells the session's clients.
"""

from __future__ import annotations

from typing import Literal

from django.db import transaction
from django.utils import timezone

from memory.constants import DEPRECATED_GUARD_ERROR, KEEP_IN_MEMORY_GUARD_ERROR
from memory.events import publish_on_commit, topic_updated
from memory.models import MemoryDecision, MemoryState, Topic
from memory.persistent import invalidate_persistent_memory

AgentAction = Literal["promote", "demote", "deprecate"]

# What a click on the brain icon does: gray → teal → red → gray.
NEXT_USER_STATE = {
    MemoryState.NONE: MemoryState.PROMOTED,
    MemoryState.PROMOTED: MemoryState.DEPRECATED,
    MemoryState.DEPRECATED: MemoryState.NONE,
}

_AGENT_TARGET = {
    "promote": MemoryState.PROMOTED,
    "demote": MemoryState.NONE,
    "deprecate": MemoryState.DEPRECATED,
}


class CurationRefused(Exception):
    """The agent tried to override a human decision; the message says why."""


def check_agent_curation(*, topic: Topic, action: AgentAction) -> MemoryState:
    """The user-decision guard. Returns the target state or raises CurationRefused."""
    if action not in _AGENT_TARGET:
        raise CurationRefused(f"unknown action {action!r}; use one of: promote, demote, deprecate")
    if action == "deprecate":
        if topic.deprecated_manually_set:
            raise CurationRefused(DEPRECATED_GUARD_ERROR)
    else:
        if topic.keep_in_memory_manually_set:
            raise CurationRefused(KEEP_IN_MEMORY_GUARD_ERROR)
        if topic.deprecated:
            raise CurationRefused("this topic is deprecated; only the user can un-deprecate it.")
    return _AGENT_TARGET[action]


def do_agent_curation(*, topic: Topic, action: AgentAction) -> MemoryDecision | None:
    """The agent's manage_topic_memory: guarded, then applied."""
    with transaction.atomic():
        topic = (
            Topic.objects.select_for_update(of=("self",)).select_related("session").get(pk=topic.pk)
        )
        state = check_agent_curation(topic=topic, action=action)
        return _apply_state(topic=topic, state=state, actor=MemoryDecision.Actor.AGENT)


def do_user_curation(*, topic: Topic, state: MemoryState, user) -> MemoryDecision | None:
    """The user's choice: any state, always accepted, and remembered as manual."""
    with transaction.atomic():
        topic = (
            Topic.objects.select_for_update(of=("self",)).select_related("session").get(pk=topic.pk)
        )
        return _apply_state(topic=topic, state=state, actor=MemoryDecision.Actor.USER, user=user)


def do_summarizer_flag(*, topic: Topic, keep_in_memory: bool) -> MemoryDecision | None:
    """The summary's include_in_memory, unless the user already chose.

    The caller holds the topic row (select_for_update) inside its transaction.
    """
    if topic.keep_in_memory_manually_set or topic.keep_in_memory == keep_in_memory:
        return None
    before = topic.memory_state
    topic.keep_in_memory = keep_in_memory
    return _record_change(
        topic=topic, before=before, actor=MemoryDecision.Actor.SUMMARIZER, fields=["keep_in_memory"]
    )


def _apply_state(
    *, topic: Topic, state: MemoryState, actor: str, user=None
) -> MemoryDecision | None:
    before = topic.memory_state
    keep = state == MemoryState.PROMOTED
    deprecated = state == MemoryState.DEPRECATED
    fields = []
    if actor == MemoryDecision.Actor.USER:
        # The user's position on each dimension they touched (or chose) is now fixed.
        if keep != topic.keep_in_memory or state != MemoryState.DEPRECATED:
            topic.keep_in_memory_manually_set = True
            fields.append("keep_in_memory_manually_set")
        if deprecated != topic.deprecated or deprecated:
            topic.deprecated_manually_set = True
            fields.append("deprecated_manually_set")
    topic.keep_in_memory = keep
    topic.deprecated = deprecated
    if before == state:
        if fields:
            topic.save(update_fields=fields)
            publish_on_commit(topic.session_id, _updated(topic))
        return None
    publish_on_commit(topic.session_id, _updated(topic))
    return _record_change(
        topic=topic,
        before=before,
        actor=actor,
        user=user,
        fields=["keep_in_memory", "deprecated", *fields],
    )


def _record_change(
    *, topic: Topic, before: MemoryState, actor: str, fields: list[str], user=None
) -> MemoryDecision | None:
    after = topic.memory_state
    if before == MemoryState.NONE and after != MemoryState.NONE:
        topic.memory_changed_at = timezone.now()
        fields.append("memory_changed_at")
    topic.save(update_fields=fields)
    if before == after:
        return None
    decision = MemoryDecision.objects.create(
        topic=topic,
        topic_title=topic.title,
        actor=actor,
        user=user,
        from_state=before,
        to_state=after,
    )
    invalidate_persistent_memory(topic.session.memory_scope_key)
    return decision


def _updated(topic: Topic):
    return topic_updated(topic, reason="curation")
