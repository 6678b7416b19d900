"""A topic's memory state as it is written: the change, its audit row, the cache.

Whoever moves a topic between the three states (the user, the agent, the summarizer; the
rules of who may are memory/actions/curation.py's), the change is written here: the
topic's flags, when it entered memory (the block's order), one ``MemoryDecision`` audit
row, and the scope's persistent-memory cache invalidated. The summarizer's flag is
applied here too, under the user-decision guard, so a summary (memory/actions/summarize.py)
writes the same way without depending on curation.
"""

from __future__ import annotations

from django.utils import timezone

from memory.models import MemoryDecision, MemoryState, Topic
from memory.stores.persistent import invalidate_persistent_memory


def record_state_change(
    *, topic: Topic, before: MemoryState, actor: str, fields: list[str], user=None
) -> MemoryDecision | None:
    """Save ``fields`` of ``topic`` (its flags already set by the caller, who holds the row)
    and, when its state changed from ``before``, audit and invalidate."""
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


def apply_summarizer_flag(
    *, topic: Topic, keep_in_memory: bool, suggested: bool = False
) -> MemoryDecision | None:
    """The summary's include_in_memory, unless the user already chose, or the agent
    promoted the topic explicitly and the user has not written in it since, or the
    consolidator merged it into another entry and the user has not written in it since.

    ``suggested``: the summary would promote the topic but it holds outside tool results;
    it is marked as waiting for the user (``Topic.memory_suggested``) while it is out of
    memory and the user has not chosen.

    The caller holds the topic row (select_for_update) inside its transaction.
    """
    decision = _apply_flag(topic, keep_in_memory)
    _mark_suggested(topic, suggested and not topic.user_took_position and not topic.in_memory)
    return decision


def _apply_flag(topic: Topic, keep_in_memory: bool) -> MemoryDecision | None:
    if topic.keep_in_memory_manually_set or topic.keep_in_memory == keep_in_memory:
        return None
    if (
        not keep_in_memory
        and topic.agent_promoted_through_seq is not None
        and not topic.has_user_message_after(topic.agent_promoted_through_seq)
    ):
        return None  # the agent's promise stands until there is new evidence
    if (
        keep_in_memory
        and topic.consolidated_through_seq is not None
        and not topic.has_user_message_after(topic.consolidated_through_seq)
    ):
        return None  # merged into another entry by the consolidator: that entry holds it
    before = topic.memory_state
    topic.keep_in_memory = keep_in_memory
    return record_state_change(
        topic=topic, before=before, actor=MemoryDecision.Actor.SUMMARIZER, fields=["keep_in_memory"]
    )


def _mark_suggested(topic: Topic, suggested: bool) -> None:
    if topic.memory_suggested != suggested:
        topic.memory_suggested = suggested
        topic.save(update_fields=["memory_suggested"])
