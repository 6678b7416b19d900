"""Curation: moving a topic between the three memory states, and correcting its text.

The user may set any state and every change of theirs sets the matching manual flag.
The agent may promote, demote and deprecate any topic of its (agent, user, organization)
scope until the user has taken a position: after that its promote and demote are refused
(keep-in-memory set manually), and so is its deprecate (either manual flag). It can never
un-deprecate. The summarizer only sets keep-in-memory, never against the user, and never
against the agent's explicit promote until the user has written again in the topic.

Text from outside is never promoted without the user: a topic that holds results of tools
other than the built-ins (an MCP page can carry an injection) is promoted neither by its
summary's include_in_memory (memory/actions/summarize.py) nor by the agent's promote,
which is refused saying so; the user can still promote it with the brain icon.

Nothing enters memory untitled: promoting or deprecating a topic that has no title (or,
for a promotion, no summary) summarizes it first, with the model call made before any
row lock is taken; a topic without messages cannot be promoted or deprecated.

The user may also edit a topic's title and summary: a manual decision like the brain
toggle (audited, cache invalidated), which a later summary of the same messages does not
overwrite (memory/actions/summarize.py ``apply_summary``).

Every accepted change writes an audit row, invalidates the persistent-memory cache of
the scope and tells the session's clients.
"""

from __future__ import annotations

from typing import Literal

from django.db import transaction

from memory.actions.summarize import do_summarize_topic
from memory.events import publish_on_commit, topic_updated
from memory.lib.errors import (
    DEPRECATED_GUARD_ERROR,
    EMPTY_TOPIC_ERROR,
    KEEP_IN_MEMORY_GUARD_ERROR,
    OUTSIDE_TOOL_PROMOTION_ERROR,
    USER_POSITION_GUARD_ERROR,
    Refused,
)
from memory.lib.text import UNTITLED_TOPIC, shown_topic_title
from memory.lib.validation import check_summary, check_topic_title
from memory.models import MemoryDecision, MemoryState, Message, Topic
from memory.stores.memory_states import record_state_change
from memory.stores.messages import forget_recalled_blocks
from memory.stores.persistent import invalidate_topic_memory

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


class CurationRefused(Refused):
    """A curation that cannot be made (the guard, an empty or untitled topic); the message
    says why, in words for the one who asked (the agent reads it word for word)."""

    code = "curation_refused"


def check_agent_curation(*, topic: Topic, action: AgentAction) -> MemoryState:
    """The user-decision guard. Returns the target state or raises CurationRefused."""
    if action not in _AGENT_TARGET:
        raise CurationRefused(f"unknown action {action!r}; use one of: promote, demote, deprecate")
    if action == "deprecate":
        if topic.deprecated_manually_set:
            raise CurationRefused(DEPRECATED_GUARD_ERROR)
        if topic.user_took_position:
            raise CurationRefused(USER_POSITION_GUARD_ERROR)
    else:
        if topic.keep_in_memory_manually_set:
            raise CurationRefused(KEEP_IN_MEMORY_GUARD_ERROR)
        if topic.deprecated:
            raise CurationRefused("this topic is deprecated; only the user can un-deprecate it.")
        if action == "promote" and topic.messages.outside_tool_results().exists():
            raise CurationRefused(OUTSIDE_TOOL_PROMOTION_ERROR)
    return _AGENT_TARGET[action]


def do_agent_curation(*, topic: Topic, action: AgentAction) -> MemoryDecision | None:
    """The agent's manage_topic_memory: guarded, titled if need be, then applied."""
    state = check_agent_curation(topic=topic, action=action)  # refuse early, before a summary
    _prepare_entry(topic=topic, state=state)
    with transaction.atomic():
        topic = _locked(topic.pk)
        state = check_agent_curation(topic=topic, action=action)
        _check_entry(topic=topic, state=state)
        return _apply_state(topic=topic, state=state, actor=MemoryDecision.Actor.AGENT)


def do_user_curation(*, topic: Topic, state: MemoryState, user) -> MemoryDecision | None:
    """The user's choice: any state, accepted unless the topic is empty, and remembered as
    manual."""
    _prepare_entry(topic=topic, state=state)
    with transaction.atomic():
        topic = _locked(topic.pk)
        _check_entry(topic=topic, state=state)
        return _apply_state(topic=topic, state=state, actor=MemoryDecision.Actor.USER, user=user)


def do_user_edit_topic(
    *, topic: Topic, user, title: str | None = None, summary: str | None = None
) -> MemoryDecision | None:
    """The user's correction of a topic's title and/or summary.

    It stands until the topic receives a new message (a summary of the same messages
    keeps it); the next summary then starts from it. Audited, and the scope's memory
    cache is invalidated when the topic is in memory.
    """
    title = None if title is None else check_topic_title(title)
    summary = None if summary is None else check_summary(summary)
    with transaction.atomic():
        topic = _locked(topic.pk)
        new_title = topic.title if title is None else title
        new_summary = topic.summary if summary is None else summary
        if (new_title, new_summary) == (topic.title, topic.summary):
            return None
        topic.title, topic.summary = new_title, new_summary
        # The user's text is now the summary of everything so far: the next refresh
        # builds on it and sends only what comes after (memory/actions/summarize.py).
        topic.summary_manually_set = True
        topic.summary_is_fallback = False
        topic.summarized_through_seq = topic.last_seq()
        topic.save(
            update_fields=[
                "title",
                "summary",
                "summary_manually_set",
                "summary_is_fallback",
                "summarized_through_seq",
            ]
        )
        invalidate_topic_memory(topic=topic)
        publish_on_commit(topic.session_id, _updated(topic))
        state = topic.memory_state
        return MemoryDecision.objects.create(
            topic=topic,
            topic_title=topic.title,
            action=MemoryDecision.Action.EDIT,
            actor=MemoryDecision.Actor.USER,
            user=user,
            from_state=state,
            to_state=state,
        )


def _locked(topic_id: int) -> Topic:
    return Topic.objects.select_for_update(of=("self",)).select_related("session").get(pk=topic_id)


def _needs_summary(topic: Topic, state: MemoryState) -> bool:
    """Would the topic enter memory without a title (or, promoted, without a summary)?"""
    if state == MemoryState.NONE:
        return False
    return not topic.title.strip() or (state == MemoryState.PROMOTED and not topic.summary.strip())


def _prepare_entry(*, topic: Topic, state: MemoryState) -> None:
    """Before any lock: refuse an empty topic, summarize an untitled one (a model call)."""
    if state == MemoryState.NONE:
        return
    topic = Topic.objects.get(pk=topic.pk)  # the caller's copy may be stale
    _check_not_empty(topic)
    if _needs_summary(topic, state) and not topic.edit_stands:  # a summary would not apply
        do_summarize_topic(topic_id=topic.pk)


def _check_entry(*, topic: Topic, state: MemoryState) -> None:
    """Under the lock: what enters memory has messages and a title."""
    if state == MemoryState.NONE:
        return
    _check_not_empty(topic)
    if shown_topic_title(topic.title) == UNTITLED_TOPIC:
        raise CurationRefused(
            "this topic has no title yet and none could be made from it: give it a title "
            "(Edit), then try again."
        )


def _check_not_empty(topic: Topic) -> None:
    if not Message.objects.filter(topic_id=topic.pk).conversation().exists():
        raise CurationRefused(EMPTY_TOPIC_ERROR)


def _apply_state(
    *, topic: Topic, state: MemoryState, actor: str, user=None
) -> MemoryDecision | None:
    before = topic.memory_state
    keep = state == MemoryState.PROMOTED
    deprecated = state == MemoryState.DEPRECATED
    fields = []
    # The agent's explicit promote holds against the summarizer until the user writes
    # again; any other decision ends that promise.
    promised = (
        topic.last_seq()
        if actor == MemoryDecision.Actor.AGENT and state == MemoryState.PROMOTED
        else None
    )
    if topic.agent_promoted_through_seq != promised:
        topic.agent_promoted_through_seq = promised
        fields.append("agent_promoted_through_seq")
    if actor == MemoryDecision.Actor.USER:
        if topic.memory_suggested:  # the user answered the suggestion, either way
            topic.memory_suggested = False
            fields.append("memory_suggested")
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
    if deprecated:
        forget_recalled_blocks(session_id=topic.session_id)  # never quoted again as live
    return record_state_change(
        topic=topic,
        before=before,
        actor=actor,
        user=user,
        fields=["keep_in_memory", "deprecated", *fields],
    )


def _updated(topic: Topic):
    return topic_updated(topic, reason="curation")
