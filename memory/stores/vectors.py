"""Stored sentence vectors of messages and topics: computed once, read ever after.

A message's vector is of its content, a topic's of its title and summary
(:func:`topic_text`), both by memory/text/embeddings.py and stored as compact bytes on the
row (``Message.embedding``, ``Topic.embedding``; migration 0016_embeddings). A row
without one (written before, or by another encoder) gets it the first time it is asked
for, in one batch and one ``bulk_update``; a topic's is computed again only when its
title or summary changed (``Topic.embedding_key``, a digest of the text). Nothing
here is recomputed per turn: the drift check (memory/actions/evaluation.py) embeds and
stores the vectors of the active topic's messages and of its title and summary whenever
it refreshes them; a turn's recall reads them and never writes (a row the check has not
reached yet is embedded for that turn only). No event: a vector is derived, never shown.

A turn reads its vectors as rows of plain values (:func:`read_vectors`,
:func:`read_topic_vectors`), not as model objects: building a few hundred of those, each
with its long text, and decoding each vector on its own, was most of the CPU recall by
meaning added to a turn (issue 46: 24 ms of 31 on a loaded 2-core machine).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
from django.db.models import Case, F, Q, TextField, Value, When
from django.db.models.functions import Length

from memory.models import Message, Topic
from memory.text.embeddings import dimensions, embed, from_bytes, to_bytes

Stored = bytes | memoryview | None


def topic_text(topic: Topic) -> str:
    return _topic_text(topic.title, topic.summary)


def _topic_text(title: str, summary: str) -> str:
    return f"{title}\n{summary}".strip()


def decoded(stored: Sequence[Stored]) -> tuple[np.ndarray, np.ndarray]:
    """The stored vectors as one float32 matrix, decoded by one numpy call, and which rows
    hold one (a row of zeros where none is stored, or another encoder's)."""
    width = dimensions()
    valid = np.array([data is not None and len(data) == 2 * width for data in stored], dtype=bool)
    matrix = np.zeros((len(stored), width), dtype=np.float32)
    if valid.any():
        joined = b"".join(data for data, ok in zip(stored, valid, strict=True) if ok)
        matrix[valid] = np.frombuffer(joined, dtype="<f2").reshape(-1, width)
    return matrix, valid


def pending_content() -> Case:
    """A message's content when it has no vector of this encoder yet, else ``""``: what
    :func:`read_vectors` must embed, read in the same query as the vectors."""
    stored = Q(embedding__isnull=False) & Q(embedding_size=2 * dimensions())
    return Case(When(stored, then=Value("")), default=F("content"), output_field=TextField())


def with_vectors(messages, *fields: str):
    """``messages`` as ``(pk, embedding, pending content, *fields)`` rows for
    :func:`read_vectors` (``fields``: more columns the caller reads in the same query)."""
    return messages.annotate(
        embedding_size=Length("embedding"),
        pending=pending_content(),
    ).values_list("pk", "embedding", "pending", *fields)


def read_vectors(rows: Sequence[tuple[int, Stored, str]]) -> np.ndarray:
    """The vectors of :func:`with_vectors` rows, one matrix row each; a message without
    one is embedded for this call only, nothing stored (a turn reads, never writes)."""
    matrix, valid = decoded([row[1] for row in rows])
    missing = np.flatnonzero(~valid)
    if missing.size:
        matrix[missing] = embed([rows[index][2] for index in missing])
    return matrix


def read_topic_vectors(rows: Sequence[tuple[Stored, str, str, str]]) -> np.ndarray:
    """The vectors of topics given as ``(embedding, embedding_key, title, summary)`` rows,
    one matrix row each, as :func:`topic_vectors` would give them (a stale one, of an
    older title or summary, computed again), for this call only: nothing stored."""
    matrix, valid = decoded([row[0] for row in rows])
    texts = [_topic_text(title, summary) for _, _, title, summary in rows]
    stale = [
        index
        for index, (_, key, _, _) in enumerate(rows)
        if not valid[index] or key != _digest(texts[index])
    ]
    if stale:
        matrix[stale] = embed([texts[index] for index in stale])
    return matrix


def message_vectors(messages: Iterable[Message], *, store: bool = True) -> list[np.ndarray]:
    """The vector of every message given, in order, computing the missing and storing
    them (``store``; a message not saved yet gets one computed, nothing stored)."""
    messages = list(messages)
    found: list[np.ndarray | None] = [from_bytes(message.embedding) for message in messages]
    missing = [index for index, vector in enumerate(found) if vector is None]
    if missing:
        vectors = embed([messages[index].content for index in missing])
        for index, vector in zip(missing, vectors, strict=True):
            messages[index].embedding = to_bytes(vector)
            found[index] = vector
        saved = [messages[index] for index in missing if messages[index].pk is not None]
        if store and saved:
            Message.objects.bulk_update(saved, ["embedding"], batch_size=200)
    return found  # type: ignore[return-value]


def topic_vectors(topics: Iterable[Topic], *, store: bool = True) -> dict[int, np.ndarray]:
    """The vector of every topic given (by pk), of its title and summary as they are now,
    computing the missing and stale ones and storing them (``store``)."""
    topics = list(topics)
    found: dict[int, np.ndarray] = {}
    stale: list[Topic] = []
    for topic in topics:
        vector = from_bytes(topic.embedding)
        if vector is None or topic.embedding_key != _digest(topic_text(topic)):
            stale.append(topic)
        else:
            found[topic.pk] = vector
    if stale:
        vectors = embed([topic_text(topic) for topic in stale])
        for topic, vector in zip(stale, vectors, strict=True):
            topic.embedding = to_bytes(vector)
            topic.embedding_key = _digest(topic_text(topic))
            found[topic.pk] = vector
        if store:
            Topic.objects.bulk_update(stale, ["embedding", "embedding_key"], batch_size=200)
    return found


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# --------------------------------------------------------------------------- #
# Backfill: rows stored before vectors existed (memory/actions/backfill.py)
# --------------------------------------------------------------------------- #


def messages_without_vectors():
    """Messages with no vector of this encoder (none stored, or another encoder's)."""
    return Message.objects.annotate(embedding_size=Length("embedding")).filter(
        Q(embedding__isnull=True) | ~Q(embedding_size=2 * dimensions())
    )


def store_message_vectors(*, after: int, batch_size: int) -> tuple[int, int]:
    """Embed and store (:func:`message_vectors`) the vectors of the next ``batch_size``
    messages without one, by primary key after ``after``. Returns (how many were stored,
    the last primary key read; ``after`` when none was left)."""
    batch = list(
        messages_without_vectors()
        .filter(pk__gt=after)
        .order_by("pk")
        .only("pk", "content", "embedding")[:batch_size]
    )
    if not batch:
        return 0, after
    message_vectors(batch)
    return len(batch), batch[-1].pk


def store_topic_vectors(*, after: int, batch_size: int) -> tuple[int, int]:
    """Embed and store (:func:`topic_vectors`) the vectors of the topics among the next
    ``batch_size`` after ``after`` (by primary key) whose vector is missing or of an older
    title or summary. Returns (how many were stored, the last primary key read; ``after``
    at the end)."""
    batch = list(
        Topic.objects.filter(pk__gt=after)
        .order_by("pk")
        .only("pk", "title", "summary", "embedding", "embedding_key")[:batch_size]
    )
    if not batch:
        return 0, after
    before = [topic.embedding for topic in batch]
    topic_vectors(batch)
    stored = sum(topic.embedding is not old for topic, old in zip(batch, before, strict=True))
    return stored, batch[-1].pk
