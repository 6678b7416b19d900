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
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from memory.models import Message, Topic
from memory.text.embeddings import embed, from_bytes, to_bytes


def topic_text(topic: Topic) -> str:
    return f"{topic.title}\n{topic.summary}".strip()


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
