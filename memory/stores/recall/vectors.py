"""Recall by meaning: the scope's messages nearest the query in sentence vectors, fused
with the BM25 ranking (memory/stores/recall/ranking.py) by reciprocal rank fusion.

BM25 finds passages that share the query's words; a question in French shares none with
the German passage that answers it, nor "Quelle marque est mon piano ?" with "the Yamaha
upright". So the passages recalled into a turn's context are ranked twice, by words and
by meaning, and fused.

The vector side is bounded, whatever the history's size (two queries, each with a LIMIT):

1. the scope's newest :data:`VECTOR_TOPICS` topics (the current one left out; those
   recall's words search too, from the scope's newest sessions: ``_newest_topics`` in
   memory/stores/recall/ranking.py) are ranked by the vector of their title and summary
   (memory/stores/vectors.py: stored, computed again only when the summary changed);
2. the conversation messages of the best :data:`VECTOR_TOPICS_READ` of them (at most
   :data:`VECTOR_MESSAGES`, each topic's newest first) are ranked by their stored vectors, in numpy;
   those at least :data:`VECTOR_FLOOR` close to the query are the vector list. The rows
   also hold what a hit shows of its message (its text, role, place and time, its
   session's day; its topic's title and state come with step 1), so the messages of the
   list are built from them, the others never are: no third query (issue 43's bound).

:func:`fuse` then gives each message ``1 / (RRF_K + rank)`` for each list it is in (ranks
from 1) and sorts by the sum; a tie keeps the BM25 order. The query's vector is the one
thing computed per turn (about 3 ms of CPU); every other vector is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory.models import Message, Session, Topic
from memory.stores.vectors import read_topic_vectors, read_vectors, with_vectors
from memory.text.embeddings import embed, encoder_name

VECTOR_TOPICS = 300  # the scope's latest topics ranked by meaning
VECTOR_TOPICS_READ = 6  # whose messages are ranked
VECTOR_MESSAGES = 240  # at most, each topic's newest first
#: The cosine a message needs to the query to count as found by meaning. The stand-in
#: encoder's cosines are of shared word pieces, lower for the same closeness.
VECTOR_FLOOR = {"use": 0.3, "hashed": 0.35}
RRF_K = 60  # the usual constant: a list's top ranks differ little, its tail fades


# What the messages returned show (memory/stores/recall/ranking.py ``_hit``), read with
# the vectors they are ranked by: no query more to load them (issue 43's bound).
MESSAGE_FIELDS = ("topic_id", "session_id", "seq", "role", "content", "created_at")
TOPIC_FIELDS = ("pk", "embedding", "embedding_key", "title", "summary")
TOPIC_STATE = ("session_id", "deprecated", "keep_in_memory")  # after TOPIC_FIELDS


def vector_messages(
    *, topics, query: str, replies: bool, limit: int
) -> list[tuple[Message, float]]:
    """The conversation messages of ``topics`` nearest ``query`` in meaning, best first,
    with their cosine (only those at least :data:`VECTOR_FLOOR`); topic and session
    loaded (what recall's hits read of them: the other columns are deferred).

    Ranked on plain rows (ids, stored vectors and the few columns a hit shows,
    memory/stores/vectors.py); only the messages returned are built as model objects."""
    (query_vector,) = embed([query])
    if not np.any(query_vector):
        return []
    latest = list(topics.order_by("-pk").values_list(*TOPIC_FIELDS, *TOPIC_STATE)[:VECTOR_TOPICS])
    if not latest:
        return []
    closeness = read_topic_vectors([row[1:5] for row in latest]) @ query_vector
    nearest = [latest[i] for i in np.argsort(-closeness, kind="stable")[:VECTOR_TOPICS_READ]]
    rows = Message.objects.filter(topic_id__in=[row[0] for row in nearest]).conversation()
    if not replies:
        rows = rows.filter(role=Message.Role.USER)
    # In the (topic, -seq) index's order: a newest-first scan of the whole table is not.
    ordered = rows.order_by("topic_id", "-seq")
    ranked = list(with_vectors(ordered, *MESSAGE_FIELDS, "session__created_at")[:VECTOR_MESSAGES])
    if not ranked:
        return []
    scores = read_vectors(ranked) @ query_vector
    floor = VECTOR_FLOOR.get(encoder_name(), 0.3)
    order = [i for i in np.argsort(-scores, kind="stable")[:limit] if scores[i] >= floor]
    by_pk = {row[0]: row for row in nearest}
    return [(_message(ranked[i], by_pk), float(scores[i])) for i in order]


def _message(row: tuple, topics: dict[int, tuple]) -> Message:
    """The message of a ranked row, with its topic and session set as ``select_related``
    sets them; the columns not read are deferred (one query each, if ever asked for)."""
    pk, _, _, *values, session_created_at = row
    message = _built(Message, {"id": pk, **dict(zip(MESSAGE_FIELDS, values, strict=True))})
    topic = topics[message.topic_id]
    fields = ("id", *TOPIC_FIELDS[1:], *TOPIC_STATE)
    message.topic = _built(Topic, dict(zip(fields, topic, strict=True)))
    message.session = _built(Session, {"id": message.session_id, "created_at": session_created_at})
    return message


def _built(model, values: dict):
    """A ``model`` instance as the database gave it (``Model.from_db``), of these columns."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname in values]
    return model.from_db(model.objects.db, names, [values[name] for name in names])


def fuse(by_words: Sequence[Message], by_meaning: Sequence[Message]) -> list[Message]:
    """Reciprocal rank fusion of the two rankings (each best first); BM25 breaks ties."""
    score: dict[int, float] = {}
    rows: dict[int, Message] = {}
    for ranking in (by_words, by_meaning):
        for rank, message in enumerate(ranking, start=1):
            score[message.pk] = score.get(message.pk, 0.0) + 1.0 / (RRF_K + rank)
            rows.setdefault(message.pk, message)
    first = {message.pk: index for index, message in enumerate(by_words)}
    order = sorted(score, key=lambda pk: (-score[pk], first.get(pk, len(first))))
    return [rows[pk] for pk in order]
