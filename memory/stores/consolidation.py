"""What consolidation reads and writes: a scope's memory entries, their snapshot, the block.

A scope is one (agent, user, organization) triple, the same one persistent memory and
durable facts are keyed by. This store reads its promoted entries in the compact form the
consolidator shows the model, a ``basis`` that changes whenever anything that could
change the block changes (what a run confirms under the lock before it applies), the
fields of a topic that a run may change (``topic_fields``: saved before, compared and put
back by an undo), and the scope's rendered memory block (``scope_block``).

The writes are the consolidator's two moves on one topic (demote a merged-away source,
deprecate a superseded entry, rewrite a merge's target) and the exact restore of an
undo; each writes its ``MemoryDecision`` audit row linked to the run and invalidates the
scope's persistent-memory cache. The caller holds the rows (``lock_scope_topics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F

from memory.lib.text import shown_topic_title
from memory.models import ConsolidationRun, MemoryDecision, MemoryState, Session, Topic
from memory.stores.persistent import (
    invalidate_persistent_memory,
    scope_memory_entries,
    truncate_to_budget,
)

# The fields of a topic a run may change, and an undo puts back.
RUN_FIELDS = (
    "title",
    "summary",
    "keep_in_memory",
    "deprecated",
    "memory_changed_at",
    "consolidated_through_seq",
)


@dataclass(frozen=True)
class Scope:
    agent_id: int
    user_id: int
    organization_id: int

    @property
    def key(self) -> str:
        return f"{self.agent_id}:{self.user_id}:{self.organization_id}"

    @classmethod
    def of_session(cls, session: Session) -> Scope:
        return cls(session.agent_id, session.user_id, session.organization_id)

    @classmethod
    def of_run(cls, run: ConsolidationRun) -> Scope:
        return cls(run.agent_id, run.user_id, run.organization_id)

    def ids(self) -> dict[str, int]:
        return {
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "organization_id": self.organization_id,
        }

    def _session(self) -> Session:
        # An unsaved session names the scope for persistent memory's readers (its ids only).
        return Session(**self.ids())


@dataclass(frozen=True)
class ConsolidationEntry:
    """One entry of the block as the consolidator sees it."""

    topic_id: int
    day: str  # the date it entered memory, ISO (YYYY-MM-DD), "" when unknown
    title: str
    summary: str  # "" for a deprecated entry (the block shows its title only)
    deprecated: bool
    curated: bool  # the user took a position or edited it: the consolidator may not change it

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.topic_id, "day": self.day, "title": self.title}
        if self.deprecated:
            record["deprecated"] = True
        else:
            record["summary"] = self.summary
        if self.curated:
            record["user_curated"] = True
        return record


def is_curated(topic: Topic) -> bool:
    """The user chose this entry's state (either manual flag) or wrote its text."""
    return topic.user_took_position or topic.summary_manually_set


def _scope_topics(scope: Scope):
    return Topic.objects.in_scope(**scope.ids()).in_memory()


def memory_entries(scope: Scope) -> list[ConsolidationEntry]:
    """The scope's entries, promoted and deprecated, oldest first as the block orders them."""
    topics = _scope_topics(scope).order_by(F("memory_changed_at").asc(nulls_first=True), "pk")
    return [entry_of(topic) for topic in topics]


def entry_of(topic: Topic) -> ConsolidationEntry:
    """The topic as the consolidator sees it."""
    return ConsolidationEntry(
        topic_id=topic.pk,
        day=topic.memory_changed_at.date().isoformat() if topic.memory_changed_at else "",
        title=shown_topic_title(topic.title),
        summary="" if topic.deprecated else topic.summary.strip(),
        deprecated=topic.deprecated,
        curated=is_curated(topic),
    )


def scope_basis(scope: Scope) -> tuple:
    """Everything about the scope's in-memory topics a run depends on, in one tuple."""
    return tuple(
        _scope_topics(scope)
        .order_by("pk")
        .values_list(
            "pk",
            *RUN_FIELDS,
            "keep_in_memory_manually_set",
            "deprecated_manually_set",
            "summary_manually_set",
        )
    )


def lock_scope_topics(scope: Scope) -> dict[int, Topic]:
    """Lock the scope's in-memory topics (in id order, so two runs never deadlock)."""
    topics = _scope_topics(scope).select_for_update(of=("self",)).order_by("pk")
    return {topic.pk: topic for topic in topics}


def lock_topics(topic_ids: list[int]) -> dict[int, Topic]:
    topics = Topic.objects.select_for_update(of=("self",)).filter(pk__in=topic_ids).order_by("pk")
    return {topic.pk: topic for topic in topics}


def scope_block(scope: Scope, *, budget: int) -> str:
    """The scope's persistent-memory block as every other session of it reads it."""
    return truncate_to_budget(scope_memory_entries(session=scope._session()), budget=budget).text


def scope_dropping_entries(scope: Scope, *, budget: int) -> bool:
    """Whether the scope's block leaves entries out for its budget."""
    entries = scope_memory_entries(session=scope._session())
    return bool(truncate_to_budget(entries, budget=budget).dropped)


def topic_fields(topic: Topic) -> dict[str, Any]:
    """What a run may change on ``topic``, as JSON."""
    changed_at = topic.memory_changed_at
    return {
        "title": topic.title,
        "summary": topic.summary,
        "keep_in_memory": topic.keep_in_memory,
        "deprecated": topic.deprecated,
        "memory_changed_at": changed_at.isoformat() if changed_at else None,
        "consolidated_through_seq": topic.consolidated_through_seq,
    }


def _state(fields: dict[str, Any]) -> MemoryState:
    if fields["deprecated"]:
        return MemoryState.DEPRECATED
    return MemoryState.PROMOTED if fields["keep_in_memory"] else MemoryState.NONE


def _write(
    topic: Topic, fields: dict[str, Any], *, run: ConsolidationRun, actor: str, user=None
) -> None:
    """Give ``topic`` these ``fields``, audit the state or text change, invalidate."""
    before = topic_fields(topic)
    if fields == before:
        return
    changed_at = fields["memory_changed_at"]
    topic.title, topic.summary = fields["title"], fields["summary"]
    topic.keep_in_memory, topic.deprecated = fields["keep_in_memory"], fields["deprecated"]
    topic.memory_changed_at = datetime.fromisoformat(changed_at) if changed_at else None
    # A run recorded before this field existed has none: leave the topic's as it is.
    topic.consolidated_through_seq = fields.get(
        "consolidated_through_seq", topic.consolidated_through_seq
    )
    topic.save(update_fields=list(RUN_FIELDS))
    state_before, state_after = _state(before), _state(fields)
    text_changed = (before["title"], before["summary"]) != (fields["title"], fields["summary"])
    audit = {"topic": topic, "topic_title": topic.title, "actor": actor, "user": user}
    if state_before != state_after:
        MemoryDecision.objects.create(
            **audit, from_state=state_before, to_state=state_after, consolidation=run
        )
    if text_changed:
        MemoryDecision.objects.create(
            **audit,
            action=MemoryDecision.Action.EDIT,
            from_state=state_after,
            to_state=state_after,
            consolidation=run,
        )
    invalidate_persistent_memory(Scope.of_run(run).key)


def demote_merged(topic: Topic, *, run: ConsolidationRun) -> None:
    """A merge's source leaves memory (its subject lives on in the merge's target), and its
    summary does not bring it back until the user writes in it again."""
    _write(
        topic,
        {
            **topic_fields(topic),
            "keep_in_memory": False,
            "consolidated_through_seq": topic.last_seq(),
        },
        run=run,
        actor=MemoryDecision.Actor.CONSOLIDATOR,
    )


def deprecate_superseded(topic: Topic, *, run: ConsolidationRun) -> None:
    """A reversed decision stays in the block as ``[DEPRECATED] title``."""
    _write(
        topic,
        {**topic_fields(topic), "keep_in_memory": False, "deprecated": True},
        run=run,
        actor=MemoryDecision.Actor.CONSOLIDATOR,
    )


def rewrite_entry(topic: Topic, *, title: str, summary: str, run: ConsolidationRun) -> None:
    """A merge's target takes the merged title and summary."""
    _write(
        topic,
        {**topic_fields(topic), "title": title, "summary": summary},
        run=run,
        actor=MemoryDecision.Actor.CONSOLIDATOR,
    )


def restore_fields(topic: Topic, fields: dict[str, Any], *, run: ConsolidationRun, user) -> None:
    """Undo: the topic as it was before the run, to the byte (its place in the block too)."""
    _write(topic, fields, run=run, actor=MemoryDecision.Actor.USER, user=user)
