"""Persistent memory: the block of promoted and deprecated topics every session sees.

What is in it. For the (agent, user, organization) scope: one line per promoted topic,
``[#<id>] <title>: <summary>``, and one ``[#<id>] [DEPRECATED] <title>`` line (title
only, no summary) per deprecated topic, oldest first by ``Topic.memory_changed_at``.
The entries are capped at ``Agent.memory_token_budget`` approximate tokens with FIFO
truncation: the oldest entries are dropped first and reported as dropped. The budget
counts the entry lines; the block's short fixed header is not counted. ``[#<id>]`` is
the topic's id, the name the agent gives ``manage_topic_memory`` to curate an entry (a
few tokens, and stable: it never changes while the topic exists, so it costs the prefix
cache nothing).

The current session's own topics are left out of the block it sees. They are already in
that session's semi-stable "earlier topics" part (the newest with summaries, the older and
the deprecated ones by title), so nothing appears twice, and promoting or deprecating a
topic mid-session does not change the session's own stable prefix (its provider cache
survives). Every other session of the scope sees them from its next turn on.

The cache. The scope's full entry list (before the per-session view) is kept in the
Django cache under ``memory_cache_key(scope_key)``; an unchanged scope is served without
touching the topic table. Every change that alters the block invalidates the key:
promotion, demotion, deprecation and un-deprecation (memory/actions/curation.py), a new title or
summary of a topic in memory, and a deleted topic (:func:`invalidate_topic_memory`).
A generation token beside the entries closes the refill race: a reader that fetched
rows before a writer committed stores them under the old generation, and the next read
rejects them instead of serving a stale block.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction
from django.db.models import F

from memory.lib.text import DEPRECATED_PREFIX, shown_topic_title
from memory.lib.tokens import estimate_tokens, oldest_to_drop
from memory.models import Session, Topic

# A safety net only: every change invalidates explicitly.
CACHE_SECONDS = 24 * 60 * 60
MEMORY_HEADER = (
    "## Persistent memory\n"
    "What you were asked to remember from earlier sessions, oldest first. "
    "[DEPRECATED] marks a decision that was reversed: do not rely on it. "
    "[#N] is the topic's id for manage_topic_memory."
)


def topic_ref(topic_id: int) -> str:
    """How the memory blocks name a topic for the agent: ``[#7]``."""
    return f"[#{topic_id}]"


@dataclass(frozen=True)
class MemoryEntry:
    topic_id: int
    session_id: int
    title: str
    summary: str  # always "" for a deprecated entry: its title is all that is shown
    deprecated: bool
    tokens: int

    @property
    def line(self) -> str:
        ref = topic_ref(self.topic_id)
        if self.deprecated:
            return f"{ref} {DEPRECATED_PREFIX}{self.title}"
        return f"{ref} {self.title}: {self.summary}" if self.summary else f"{ref} {self.title}"


@dataclass(frozen=True)
class PersistentMemory:
    entries: tuple[MemoryEntry, ...]  # kept, oldest first
    dropped: tuple[MemoryEntry, ...]  # dropped by the budget, oldest first
    budget: int
    tokens: int  # approximate tokens of ``text``
    text: str  # the rendered block ("" when no entry is kept)


def memory_cache_key(scope_key: str) -> str:
    return f"persistent-memory:{scope_key}"


def _generation_key(scope_key: str) -> str:
    return f"persistent-memory-generation:{scope_key}"


def invalidate_persistent_memory(scope_key: str) -> None:
    """Drop the cached block now and again after commit.

    Now, so the rest of this transaction reads fresh; after commit, so a concurrent
    reader that refilled the cache from the pre-commit rows does not leave it stale
    (the new generation makes any such refill unreadable).
    """
    _drop(scope_key)
    transaction.on_commit(lambda: _drop(scope_key))


def invalidate_topic_memory(*, topic: Topic) -> None:
    """For an edit or deletion of a topic: invalidate when the topic is in the block.

    Call it whenever the title or summary of a topic changes, or a topic is deleted;
    it does nothing for topics that are neither promoted nor deprecated.
    """
    if topic.in_memory:
        invalidate_persistent_memory(
            Session.objects.only("agent_id", "user_id", "organization_id")
            .get(pk=topic.session_id)
            .memory_scope_key
        )


def _drop(scope_key: str) -> None:
    cache.set_many({_generation_key(scope_key): uuid.uuid4().hex}, CACHE_SECONDS)
    cache.delete(memory_cache_key(scope_key))


def get_persistent_memory(*, session: Session) -> PersistentMemory:
    """The block as ``session`` sees it: the scope's entries minus its own topics."""
    entries = tuple(e for e in scope_memory_entries(session=session) if e.session_id != session.pk)
    return truncate_to_budget(entries, budget=session.agent.memory_token_budget)


def truncate_to_budget(entries: tuple[MemoryEntry, ...], *, budget: int) -> PersistentMemory:
    """Keep the newest entries that fit; drop from the oldest (FIFO)."""
    start = oldest_to_drop([entry.tokens for entry in entries], budget)
    kept, dropped = entries[start:], entries[:start]
    text = "\n".join([MEMORY_HEADER, *(entry.line for entry in kept)]) if kept else ""
    return PersistentMemory(
        entries=kept, dropped=dropped, budget=budget, tokens=estimate_tokens(text), text=text
    )


def scope_memory_entries(*, session: Session) -> tuple[MemoryEntry, ...]:
    """Every entry of the session's scope, oldest first, through the cache."""
    scope_key = session.memory_scope_key
    key, generation_key = memory_cache_key(scope_key), _generation_key(scope_key)
    found = cache.get_many([key, generation_key])
    generation = found.get(generation_key)
    cached = found.get(key)
    if isinstance(cached, dict) and cached.get("generation") == generation:
        return tuple(MemoryEntry(*row) for row in cached["entries"])
    entries = _fetch_entries(session)
    # Plain tuples, not dataclasses: cheaper to pickle and load on every turn.
    rows = [(e.topic_id, e.session_id, e.title, e.summary, e.deprecated, e.tokens) for e in entries]
    cache.set(key, {"generation": generation, "entries": rows}, CACHE_SECONDS)
    return entries


def _fetch_entries(session: Session) -> tuple[MemoryEntry, ...]:
    rows = (
        Topic.objects.in_scope(
            agent_id=session.agent_id,
            user_id=session.user_id,
            organization_id=session.organization_id,
        )
        .in_memory()
        .order_by(F("memory_changed_at").asc(nulls_first=True), "pk")
        .values_list("pk", "session_id", "title", "summary", "deprecated")
    )
    return tuple(_entry(*row) for row in rows)


def _entry(topic_id: int, session_id: int, title: str, summary: str, deprecated: bool):
    title = shown_topic_title(title)
    summary = "" if deprecated else summary.strip()
    line = MemoryEntry(topic_id, session_id, title, summary, deprecated, 0).line
    return MemoryEntry(topic_id, session_id, title, summary, deprecated, estimate_tokens(line))
