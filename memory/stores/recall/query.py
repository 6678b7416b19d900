"""Recall's candidates on PostgreSQL, bounded by the scope, not the table: one statement.

The messages of a recall come from one query (``scoped_messages``) that reads a window
of the user's newest messages: up to ``RECALL_WINDOW`` from before the current topic
began and as many since (two LIMITed ranges of the btree that starts with the user,
migration 0016, so neither the current topic's length nor the table counts), keeps the
scope's conversation messages among them, and takes for each term its newest
``RECALL_PER_TERM`` matches there; a term with fewer (a rare word) is looked for further
back through the GIN index that starts with the user too (``btree_gin``), stopping at as
many. Each candidate comes with its topic and session in the same statement. No term is
counted over the scope per turn: how rare a term is, recall reads among the candidates
(``bm25_ranked`` in memory/stores/recall/ranking.py). The messages around the hits (the
other halves of their exchanges) are read here too, in one statement (``near_rows``), and
so are the candidates among the scope's newest topics and their notes (``topic_candidates``).

The statement runs under ``RECALL_TIMEOUT_MS`` (``statement_timeout``, set locally, in a
transaction of its own, with no JIT): past it, ``RecallTooSlow`` (a ``SearchError``), which the
context answers with no passages and the tool as a refused query; either way logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connection, transaction
from django.db.models.expressions import RawSQL

from memory.lib.errors import InvalidInput
from memory.models import Message, Notes, Session, Topic
from memory.stores.search import PG_CONFIG, SearchError

logger = logging.getLogger(__name__)

RECALL_WINDOW = 4_000  # the user's newest messages read first, before and since the topic
RECALL_PER_TERM = 20  # candidates per term, newest first
RECALL_TIMEOUT_MS = 300  # one recall's statements; past it, no passages (logged)

_CONVERSATION = "(m.role = 'user' OR (m.role = 'assistant' AND m.tool_calls = '[]'::jsonb))"
# The window: the user's newest messages from before the current topic began, and the
# newest since then (another session's, in between): two ranges of the (user, id) btree,
# each LIMITed, so neither the current topic's length nor the table's counts. The scope is
# never listed: each session the window holds is checked against it once, by its primary
# key (``_in_scope``), and an older match by its own session's. A scalar subquery, which
# the planner runs per row, where an EXISTS or IN would be turned into a join that reads
# every session of the scope.
_IDS_SQL = f"""
WITH terms AS MATERIALIZED (
    SELECT to_tsquery('{PG_CONFIG}', term) AS q FROM unnest(%s::text[]) AS term),
began AS MATERIALIZED (
    SELECT coalesce((SELECT m.id FROM memory_message AS m WHERE m.topic_id = %s
        ORDER BY m.topic_id DESC, m.seq ASC LIMIT 1), 9223372036854775807) AS id),
newest AS MATERIALIZED (
    (SELECT m.id, m.session_id, m.topic_id, m.role, m.tool_calls, m.search_vector
        FROM memory_message AS m
        WHERE m.recall_user_id = %s AND m.id > (SELECT id FROM began)
        ORDER BY m.recall_user_id DESC, m.id DESC LIMIT {RECALL_WINDOW})
    UNION ALL
    (SELECT m.id, m.session_id, m.topic_id, m.role, m.tool_calls, m.search_vector
        FROM memory_message AS m
        WHERE m.recall_user_id = %s AND m.id < (SELECT id FROM began)
        ORDER BY m.recall_user_id DESC, m.id DESC LIMIT {RECALL_WINDOW})),
scope AS MATERIALIZED (
    SELECT w.id FROM (SELECT DISTINCT session_id AS id FROM newest) AS w
    WHERE w.id = ({{window_in_scope}})),
win AS MATERIALIZED (
    SELECT m.id, m.search_vector FROM newest AS m
    WHERE m.session_id = ANY (ARRAY(SELECT id FROM scope)) AND m.topic_id <> %s AND {{roles}}),
oldest AS MATERIALIZED (
    SELECT coalesce(min(id), 0) AS id FROM newest WHERE id < (SELECT id FROM began))
-- The window is read in the order it was written, newest first: a common word stops the
-- scan at its first matches instead of being matched in every row of the window.
SELECT c.id FROM terms AS t
CROSS JOIN LATERAL (
    (SELECT w.id FROM win AS w WHERE w.search_vector @@ t.q LIMIT {RECALL_PER_TERM})
    UNION ALL
    (SELECT m.id FROM memory_message AS m
        WHERE m.recall_user_id = %s AND m.search_vector @@ t.q
            AND m.id + 0 < (SELECT id FROM oldest) AND m.topic_id <> %s AND {{roles}}
            AND m.session_id = ({{match_in_scope}})
        LIMIT {RECALL_PER_TERM})
    LIMIT {RECALL_PER_TERM}) AS c
"""


class RecallTooSlow(SearchError):
    """A recall ran past RECALL_TIMEOUT_MS and was stopped."""

    code = "recall_too_slow"

    def __init__(self) -> None:
        InvalidInput.__init__(
            self,
            "recall took too long; try more specific words",
            field="query",
            code="recall_too_slow",
        )


@contextmanager
def time_limited_recall() -> Iterator[None]:
    """The statements inside run under RECALL_TIMEOUT_MS (PostgreSQL); past it,
    RecallTooSlow, logged."""
    if connection.vendor != "postgresql":
        yield
        return
    outer = connection.in_atomic_block
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            # No JIT: compiling the statement (its cost estimate is of a scan the LIMITs
            # stop early) took over a second at 10^6 messages, for a run of milliseconds.
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true), set_config('jit', 'off', true)",
                [str(RECALL_TIMEOUT_MS)],
            )
            yield
            if outer:  # the enclosing transaction goes on: its own settings again
                cursor.execute("SET LOCAL statement_timeout TO DEFAULT; SET LOCAL jit TO DEFAULT")
    except OperationalError as err:
        if getattr(err.__cause__, "sqlstate", None) == "57014":  # query_canceled
            logger.warning("recall stopped after %d ms: no passages", RECALL_TIMEOUT_MS)
            raise RecallTooSlow() from err
        raise


def scoped_messages(
    *, sessions, user_id: int, terms: list[str], exclude_topic_id: int | None, replies: bool
) -> list[Message]:
    """The candidate messages of a recall (see the module's docstring), with topic and
    session, newest first: one statement."""
    window_sql, window_params = _in_scope(sessions, "w.id")
    match_sql, match_params = _in_scope(sessions, "m.session_id")
    roles = _CONVERSATION if replies else "m.role = 'user'"
    sql = _IDS_SQL.format(window_in_scope=window_sql, match_in_scope=match_sql, roles=roles)
    excluded = exclude_topic_id if exclude_topic_id is not None else 0
    queries = [f"{term}:*" for term in terms]
    params = [
        queries,
        excluded,
        user_id,
        user_id,
        *window_params,
        excluded,
        user_id,
        excluded,
        *match_params,
    ]
    rows = Message.objects.filter(pk__in=RawSQL(sql, params)).with_place().order_by("-pk")
    return list(rows)


# The conversation messages within ``span`` of each (topic, seq) of the arrays, once each,
# each range read on the (topic, -seq) index.
_NEAR_SQL = f"""
SELECT DISTINCT m.id, m.topic_id, m.seq, m.role, m.content
FROM unnest(%s::bigint[], %s::integer[]) AS h(topic_id, seq)
CROSS JOIN LATERAL (
    SELECT m.id, m.topic_id, m.seq, m.role, m.content FROM memory_message AS m
    WHERE m.topic_id = h.topic_id AND m.seq BETWEEN h.seq - %s AND h.seq + %s
        AND {_CONVERSATION}) AS m
ORDER BY m.seq"""


def near_rows(places: list[tuple[int, int]], *, span: int) -> list[tuple]:
    """The conversation messages at most ``span`` from each ``(topic_id, seq)`` place
    (recall's hits), as ``(id, topic_id, seq, role, content)`` rows in ``seq`` order: the
    other halves of their exchanges (ranking.py ``exchanges``). Written out: built by the
    ORM, the places' conditions cost a turn more CPU than the statement (issue 43)."""
    topics, seqs = [topic for topic, _ in places], [seq for _, seq in places]
    with connection.cursor() as cursor:
        cursor.execute(_NEAR_SQL, [topics, seqs, span, span])
        return cursor.fetchall()


def _in_scope(sessions, session_id: str) -> tuple[str, tuple]:
    """``sessions`` (the scope) said of the one session whose id is the SQL ``session_id``:
    a primary-key lookup with the scope's conditions, whose one row is that id when the
    session is in the scope (none otherwise)."""
    one = sessions.filter(pk=RawSQL(session_id, ())).order_by().values("pk")
    return one.query.sql_with_params()


# A topic's words as the ORM's ``SearchVector("title", "summary")`` says them (search.py
# ``TOPIC_VECTOR``).
_TOPIC_WORDS = (
    f"to_tsvector('{PG_CONFIG}', coalesce(t.title, '') || ' ' || coalesce(t.summary, ''))"
)
# The newest topics' candidates: those whose title or summary holds a term, by ``ts_rank``
# as the ORM's ``SearchRank``; then the notes documents that hold one (any case), newest
# first; each with its topic and session. ``newest``: the topics' ids (a statement).
_CANDIDATES_SQL = f"""
WITH newest AS MATERIALIZED ({{newest}}),
q AS MATERIALIZED (SELECT to_tsquery('{PG_CONFIG}', %s) AS q)
SELECT c.kind, c.id, c.content, c.updated_at, t.id, t.session_id, t.title, t.summary,
    t.keep_in_memory, t.deprecated, t.created_at, s.created_at
FROM (
    (SELECT 0 AS kind, t.id AS topic_id, NULL::bigint AS id, NULL::text AS content,
            NULL::timestamptz AS updated_at,
            row_number() OVER (ORDER BY ts_rank({_TOPIC_WORDS}, q.q) DESC, t.id DESC) AS place
        FROM memory_topic AS t, q
        WHERE t.id IN (SELECT id FROM newest) AND {_TOPIC_WORDS} @@ q.q {{live}}
        ORDER BY place LIMIT {{limit}})
    UNION ALL
    (SELECT 1, n.topic_id, n.id, n.content, n.updated_at, row_number() OVER (ORDER BY n.id DESC)
        FROM memory_notes AS n JOIN memory_topic AS t ON t.id = n.topic_id
        WHERE n.topic_id IN (SELECT id FROM newest) AND n.content <> '' AND ({{words}}) {{live}}
        ORDER BY 6 LIMIT {{limit}})) AS c
JOIN memory_topic AS t ON t.id = c.topic_id
JOIN memory_session AS s ON s.id = t.session_id
ORDER BY c.kind, c.place"""


def topic_candidates(
    *, newest: tuple[str, tuple], terms: list[str], live_only: bool, limit: int
) -> list[tuple[str, Topic | Notes, str]]:
    """Recall's candidates among the ``newest`` topics (their ids: a statement and its
    parameters), in one statement: up to ``limit`` topics whose title or summary holds
    one of ``terms`` (prefixes), best first, as ``("topic", topic, its title and
    summary)``; then up to ``limit`` notes documents that hold one (any case), newest
    first, as ``("notes", notes, its text)``; the deprecated topics left out with
    ``live_only``. Each row carries the fields a hit shows (its topic and session
    loaded with it). Written out: built by the ORM, the two statements cost a recall
    more CPU than running them (issue 43)."""
    newest_sql, newest_params = newest
    words = " OR ".join(["UPPER(n.content) LIKE UPPER(%s)"] * len(terms))
    live = "AND NOT t.deprecated" if live_only else ""
    sql = _CANDIDATES_SQL.format(newest=newest_sql, live=live, words=words, limit=limit)
    likes = [f"%{connection.ops.prep_for_like_query(term)}%" for term in terms]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*newest_params, " | ".join(f"{term}:*" for term in terms), *likes])
        rows = cursor.fetchall()
    found: list[tuple[str, Topic | Notes, str]] = []
    for kind, pk, content, updated_at, topic_id, session_id, *topic_fields, session_at in rows:
        title, summary, keep_in_memory, deprecated, created_at = topic_fields
        topic = _loaded(
            Topic,
            id=topic_id,
            session_id=session_id,
            title=title,
            summary=summary,
            keep_in_memory=keep_in_memory,
            deprecated=deprecated,
            created_at=created_at,
        )
        topic.session = _loaded(Session, id=session_id, created_at=session_at)
        if kind == 0:
            found.append(("topic", topic, f"{title}\n{summary}"))
        else:
            notes = _loaded(Notes, id=pk, topic_id=topic_id, content=content, updated_at=updated_at)
            notes.topic = topic
            found.append(("notes", notes, content))
    return found


def _loaded(model, **values):
    """An instance of ``model`` as the ORM loads one with only ``values``' fields (the
    others deferred: read from the database if ever asked for)."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])
