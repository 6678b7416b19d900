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
   list are built from them, and only those that can be shown: no third query (issue
   43's bound).

:func:`fuse` then gives each message ``1 / (RRF_K + rank)`` for each list it is in (ranks
from 1) and sorts by the sum; a tie keeps the BM25 order. The query's vector is the one
thing computed per turn (about 3 ms of CPU, once: the drift check embeds the stored
message in the worker, after the turn); every other vector is read. What the rest costs a
turn is mostly the driver's and the ORM's, so both reads are written out on PostgreSQL
and carry no more than they must (issue 46: ``bench.context_assembly``'s ``+meaning``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db import connection

from memory.models import Message, Session, Topic
from memory.stores.vectors import read_topic_vectors, read_vectors
from memory.text.embeddings import dimensions, embed, encoder_name

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
_CONTENT = 2 + MESSAGE_FIELDS.index("content")  # in a message's row

# On PostgreSQL both reads are written out, not built by the ORM: building them cost a
# turn more CPU than running them (issue 46).
#
# The scope's latest topics (``{scope}``: its sessions' ids), the current one
# (``%s``, 0 for none) left out, and the deprecated ones too when ``{live}`` says so:
# ``TOPIC_FIELDS + TOPIC_STATE``, without the stored vector of a text (a digest, its
# ``embedding_key``) among the first ``%s``: those this process read for the scope's
# latest topics last time (``_seen_topics``). A topic's text seldom changes: the vectors
# were most of what the statement carried (issue 46).
_TOPICS_SQL = f"""
SELECT t.id, CASE WHEN t.embedding_key = ANY(%s::text[]) THEN NULL ELSE t.embedding END,
    t.embedding_key, t.title, t.summary,
    t.session_id, t.deprecated, t.keep_in_memory
FROM memory_topic AS t
WHERE t.session_id IN ({{scope}}) AND t.id <> %s{{live}}
ORDER BY t.id DESC LIMIT {VECTOR_TOPICS}"""
#: Scopes whose latest topics' vectors this process keeps (about 300 KB each): by the
#: encoder and the statement, each as the stored vectors of its last read by digest.
SEEN_SCOPES = 32
_seen_topics: OrderedDict[tuple, dict[str, bytes]] = OrderedDict()
_lock = threading.Lock()
_ROLES = {  # Message.objects.conversation(), or the user's messages alone
    True: "(m.role = 'user' OR (m.role = 'assistant' AND m.tool_calls = '[]'::jsonb))",
    False: "m.role = 'user'",
}
# The nearest topics' messages, each topic's newest first, in the (topic, -seq) index's
# order (a newest-first scan of the whole table is not): ``(id, embedding,
# *MESSAGE_FIELDS, the session's created_at)``, the times as microseconds since the epoch
# (exact: ``extract`` gives a numeric), made datetimes for the few messages built only:
# the driver's datetimes were a third of the statement's CPU.
_MICROSECONDS = "(extract(epoch FROM {}) * 1000000)::bigint"
_MESSAGES_SQL = {
    replies: f"""
SELECT m.id, m.embedding,
    {", ".join(f"m.{name}" for name in MESSAGE_FIELDS[:-1])},
    {_MICROSECONDS.format("m.created_at")}, {_MICROSECONDS.format("s.created_at")}
FROM memory_message AS m JOIN memory_session AS s ON s.id = m.session_id
WHERE m.topic_id = ANY(%s) AND {roles}
ORDER BY m.topic_id, m.seq DESC LIMIT {VECTOR_MESSAGES}"""
    for replies, roles in _ROLES.items()
}


class Nearest:
    """The messages nearest a query, best first: their ids and cosines, and the rows they
    were ranked by, from which :meth:`message` builds one on demand (no query). Iterated,
    ``(message, cosine)`` pairs, each message built."""

    def __init__(self, ranked: list[tuple], scores: list[float], topics: dict[int, tuple]):
        self.ids = [row[0] for row in ranked]
        self.scores = scores
        self._rows = {row[0]: row for row in ranked}
        self._topics = topics

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[tuple[Message, float]]:
        return ((self.message(pk), score) for pk, score in zip(self.ids, self.scores, strict=True))

    def message(self, pk: int) -> Message:
        return _message(self._rows[pk], self._topics)


NOTHING_NEAR = Nearest([], [], {})


def vector_messages(
    *,
    sessions,
    exclude_topic_id: int | None,
    live_only: bool,
    query: str,
    replies: bool,
    limit: int,
) -> Nearest:
    """The conversation messages of the topics of ``sessions`` (a subquery of session ids,
    ``values("pk")``: recall's ``_recent_sessions``) (but ``exclude_topic_id``;
    ``live_only``: no deprecated one) nearest ``query`` in meaning, best first, with their
    cosine (only those at least :data:`VECTOR_FLOOR`); each, when built, with topic and
    session loaded (what recall's hits read of them: the other columns are deferred).

    Ranked on plain rows (ids, stored vectors and the few columns a hit shows,
    memory/stores/vectors.py); a message is built as a model object only when asked for."""
    (query_vector,) = embed([query])
    if not np.any(query_vector):
        return NOTHING_NEAR
    latest = _topic_rows(sessions, exclude_topic_id=exclude_topic_id, live_only=live_only)
    if not latest:
        return NOTHING_NEAR
    closeness = read_topic_vectors([row[1:5] for row in latest]) @ query_vector
    nearest = [latest[i] for i in np.argsort(-closeness, kind="stable")[:VECTOR_TOPICS_READ]]
    ranked = _message_rows([row[0] for row in nearest], replies=replies)
    if not ranked:
        return NOTHING_NEAR
    # A message without a stored vector is embedded from its content (``read_vectors``).
    scores = read_vectors([(row[0], row[1], row[_CONTENT]) for row in ranked]) @ query_vector
    floor = VECTOR_FLOOR.get(encoder_name(), 0.3)
    order = [i for i in np.argsort(-scores, kind="stable")[:limit] if scores[i] >= floor]
    by_pk = {row[0]: row for row in nearest}
    return Nearest([ranked[i] for i in order], [float(scores[i]) for i in order], by_pk)


def _topic_rows(sessions, *, exclude_topic_id: int | None, live_only: bool) -> list[tuple]:
    """The scope's latest :data:`VECTOR_TOPICS` topics, newest first, as
    ``TOPIC_FIELDS + TOPIC_STATE`` rows."""
    if connection.vendor != "postgresql":
        topics = Topic.objects.filter(session__in=sessions)
        if exclude_topic_id is not None:
            topics = topics.exclude(pk=exclude_topic_id)
        if live_only:
            topics = topics.exclude(deprecated=True)
        fields = (*TOPIC_FIELDS, *TOPIC_STATE)
        return list(topics.order_by("-pk").values_list(*fields)[:VECTOR_TOPICS])
    scope, params = sessions.query.sql_with_params()
    live = " AND NOT t.deprecated" if live_only else ""
    sql = _TOPICS_SQL.format(scope=scope, live=live)
    seen = (encoder_name(), sql, *params)
    with _lock:
        known = _seen_topics.get(seen, {})
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(known), *params, exclude_topic_id or 0])
        rows = [
            (pk, known[key] if stored is None and key in known else stored, key, *rest)
            for pk, stored, key, *rest in cursor.fetchall()
        ]
    size = 2 * dimensions()
    with _lock:
        _seen_topics[seen] = {row[2]: row[1] for row in rows if row[1] and len(row[1]) == size}
        _seen_topics.move_to_end(seen)
        while len(_seen_topics) > SEEN_SCOPES:
            _seen_topics.popitem(last=False)
    return rows


def _message_rows(topic_ids: list[int], *, replies: bool) -> list[tuple]:
    """The rows of the conversation messages of ``topic_ids`` recall by meaning ranks:
    ``(id, embedding, *MESSAGE_FIELDS, the session's created_at)``, each topic's newest
    first, at most :data:`VECTOR_MESSAGES`."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_MESSAGES_SQL[replies], [topic_ids])
            return cursor.fetchall()
    rows = Message.objects.filter(topic_id__in=topic_ids).conversation()
    if not replies:
        rows = rows.filter(role=Message.Role.USER)
    fields = ("pk", "embedding", *MESSAGE_FIELDS, "session__created_at")
    return list(rows.order_by("topic_id", "-seq").values_list(*fields)[:VECTOR_MESSAGES])


def _message(row: tuple, topics: dict[int, tuple]) -> Message:
    """The message of a ranked row, with its topic and session set as ``select_related``
    sets them; the columns not read are deferred (one query each, if ever asked for)."""
    pk, _, *values, created_at, session_created_at = row
    values = [*values, _moment(created_at)]
    session_created_at = _moment(session_created_at)
    message = _built(Message, {"id": pk, **dict(zip(MESSAGE_FIELDS, values, strict=True))})
    topic = topics[message.topic_id]
    fields = ("id", *TOPIC_FIELDS[1:], *TOPIC_STATE)
    message.topic = _built(Topic, dict(zip(fields, topic, strict=True)))
    message.session = _built(Session, {"id": message.session_id, "created_at": session_created_at})
    return message


def _moment(value: datetime | int) -> datetime:
    """A time of a message's row: a datetime, or microseconds since the epoch (UTC)."""
    if isinstance(value, datetime):
        return value
    return _EPOCH + timedelta(microseconds=value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _built(model, values: dict):
    """A ``model`` instance as the database gave it (``Model.from_db``), of these columns."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname in values]
    return model.from_db(model.objects.db, names, [values[name] for name in names])


def fuse(by_words: Sequence[Message], by_meaning: Nearest, *, shown: int) -> list[Message]:
    """Reciprocal rank fusion of the two rankings (each best first); BM25 breaks ties.

    A message only meaning found, ranked there past its ``shown`` best, is left out: those
    ``shown`` are all ahead of it in the fused order and recall keeps each (what meaning
    finds is a hit), so it could never be among the ``shown`` hits. The others it found are
    built from their rows; its ranks past ``shown`` still count for the messages BM25
    found too."""
    score: dict[int, float] = {}
    for rank, message in enumerate(by_words, start=1):
        score[message.pk] = score.get(message.pk, 0.0) + 1.0 / (RRF_K + rank)
    for rank, pk in enumerate(by_meaning.ids, start=1):
        score[pk] = score.get(pk, 0.0) + 1.0 / (RRF_K + rank)
    first = {message.pk: index for index, message in enumerate(by_words)}
    wanted = set(by_meaning.ids[:shown])
    order = sorted(score, key=lambda pk: (-score[pk], first.get(pk, len(first))))
    return [
        by_words[first[pk]] if pk in first else by_meaning.message(pk)
        for pk in order
        if pk in first or pk in wanted
    ]
