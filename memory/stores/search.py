"""Search over one user's own memory: messages, topic titles and summaries, and facts.

One entry point, ``search_memory``, answers "what did we decide about the database?"
across every session the user may still see (``Session.objects.owned_by``). The agent's
``recall`` tool searches the same indexes through memory/stores/recall/ranking.py. The full-text
engine is the database's own: PostgreSQL's text search (a stored, GIN-indexed tsvector
for messages and a GIN expression index for topics, the ``simple`` configuration so every
language is matched word for word; the newest matches ranked, snippets for the returned
page only, under a statement timeout) or SQLite's FTS5 in
the embedded mode (``unicode61`` tokenizer). Both are kept by ``ensure_search_index``,
which runs after every ``migrate``.

A query is cut into Unicode words; each word matches itself and any longer word it starts
("databas" finds "databases"), and every word must match. Results come as facts, then
topics, then messages, each group by relevance, with plain-text snippets (the page
escapes them and marks the words itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import (
    SearchHeadline,
    SearchQuery,
    SearchRank,
    SearchVector,
    SearchVectorField,
)
from django.db import OperationalError, connection, transaction
from django.db.models import Expression

from memory.lib.errors import InvalidInput
from memory.lib.text import shown_topic_title
from memory.models import Agent, ImportantInfo, Message, Session, Topic

QUERY_MAX_CHARS = 200
QUERY_MAX_WORDS = 12
DEFAULT_LIMIT = 20
MAX_LIMIT = 50
SNIPPET_WORDS = 16
PG_CONFIG = "simple"

_WORD = re.compile(r"\w+", re.UNICODE)


class SearchError(InvalidInput):
    """The query cannot be searched; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="q", code="invalid_query")


@dataclass(frozen=True)
class SearchHit:
    kind: Literal["fact", "topic", "message"]
    title: str  # the fact key, the topic title, or the title of the message's topic
    snippet: str  # plain text
    session_id: int | None  # None for a fact (it is the whole answer)
    topic_id: int | None

    @property
    def kind_label(self) -> str:
        return {"fact": "Fact", "topic": "Topic", "message": "Message"}[self.kind]


def check_search_query(query: object, *, max_words: int | None = QUERY_MAX_WORDS) -> list[str]:
    """The words of a query (its first ``max_words``; all of them with None), or
    SearchError when there is nothing to search for."""
    if not isinstance(query, str):
        raise SearchError("expected text")
    if len(query) > QUERY_MAX_CHARS:
        raise SearchError(f"at most {QUERY_MAX_CHARS} characters")
    words = [word.casefold() for word in _WORD.findall(query)][:max_words]
    if not words:
        raise SearchError("type at least one word")
    return words


def search_memory(*, user, query: str, limit: int = DEFAULT_LIMIT) -> list[SearchHit]:
    """The caller's own facts, topics and messages that match every word of ``query``."""
    words = check_search_query(query)
    limit = max(1, min(limit, MAX_LIMIT))
    sessions = Session.objects.owned_by(user)
    search = _postgres if connection.vendor == "postgresql" else _sqlite
    hits = _facts(user=user, words=words)
    with time_limited():
        hits += search.topics(sessions=sessions, words=words, limit=limit)
        hits += search.messages(sessions=sessions, words=words, limit=limit)
    return hits[:limit]


def marked_segments(text: str, *, query: str) -> list[tuple[str, bool]]:
    """``text`` cut into (part, matched) pairs, a part matched when a query word starts it;
    the page marks matched parts and escapes everything."""
    try:
        words = check_search_query(query)
    except SearchError:
        return [(text, False)]
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\w*", re.IGNORECASE)
    segments, position = [], 0
    for match in pattern.finditer(text):
        segments += [(text[position : match.start()], False), (match.group(), True)]
        position = match.end()
    segments.append((text[position:], False))
    return [segment for segment in segments if segment[0]]


# --- facts: one small document per scope, matched in Python -------------------------------


def _facts(*, user, words: list[str]) -> list[SearchHit]:
    documents = ImportantInfo.objects.filter(
        user=user, agent__in=Agent.objects.usable_by(user)
    ).order_by("pk")
    hits = []
    for document in documents:
        for key, value in sorted(document.data.items()):
            text = f"{key} {value}".casefold()
            if all(word in text for word in words):
                hits.append(SearchHit("fact", key, str(value), None, None))
    return hits


# --- PostgreSQL: text search over GIN indexes ----------------------------------------------


class StoredVector(Expression):
    """A message's tsvector as stored (the generated column ``search_vector``, made by
    migration 0011 and kept by ``ensure_search_index``): matching and ranking read it
    instead of parsing every matching message again."""

    output_field = SearchVectorField()

    def __init__(self, column: str = "search_vector") -> None:
        super().__init__()
        self.column = column

    def as_sql(self, compiler, connection):
        alias = compiler.query.get_initial_alias()
        column = connection.ops.quote_name(self.column)
        return f"{compiler.quote_name_unless_alias(alias)}.{column}", []


MESSAGE_VECTOR = StoredVector()
TOPIC_VECTOR = SearchVector("title", "summary", config=PG_CONFIG)
SEARCH_INDEXES = {Topic: GinIndex(TOPIC_VECTOR, name="topic_text_search")}
MESSAGE_VECTOR_SQL = (
    "ALTER TABLE memory_message ADD COLUMN IF NOT EXISTS search_vector tsvector "
    f"GENERATED ALWAYS AS (to_tsvector('{PG_CONFIG}', coalesce(content, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS message_search_vector ON memory_message USING gin (search_vector)",
    "DROP INDEX IF EXISTS message_content_search",  # the expression index it replaces
)
# A search ranks at most this many of the newest matches, and writes snippets for the
# page it returns only. Messages are looked for first among the newest RECENT_WINDOW
# (a common word is found there at once, by the primary key); when that window holds less
# than a page, and for topics (far fewer), the matches come from the GIN index, which
# then has few to read (fewer than a page in every RECENT_WINDOW rows, on average).
RANKED_CANDIDATES = 200
RECENT_WINDOW = 4_000
# A search that still runs this long is stopped (SearchTooSlow), not left to take a core.
STATEMENT_TIMEOUT_MS = 2_000


class SearchTooSlow(SearchError):
    """The search ran past STATEMENT_TIMEOUT_MS and was stopped (the page and the API
    answer it as any refused query)."""

    code = "search_too_slow"

    def __init__(self) -> None:
        InvalidInput.__init__(
            self,
            "the search took too long; try more specific words",
            field="q",
            code="search_too_slow",
        )


@contextmanager
def time_limited() -> Iterator[None]:
    """The queries inside run under a statement timeout (PostgreSQL)."""
    if connection.vendor != "postgresql":
        yield
        return
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            yield
            cursor.execute("SET LOCAL statement_timeout TO DEFAULT")  # for an outer transaction
    except OperationalError as err:
        if getattr(err.__cause__, "sqlstate", None) == "57014":  # query_canceled
            raise SearchTooSlow() from err
        raise


def _newest_matches(
    rows, vector, query: SearchQuery, text: str, *, window: int, enough: int
) -> list[int]:
    """The ids of the newest RANKED_CANDIDATES rows of ``rows`` matching ``query`` (whose
    tsquery text is ``text``), looked for first among the newest ``window`` rows: when
    those hold ``enough`` (a page), they are the candidates."""
    found = _matches_in_window(rows, vector, text, window=window) if window else []
    if len(found) >= enough:
        return found
    # Too few in the window: every match, through the index (the CTE keeps the planner
    # from walking the primary key backwards through every row to find a rare word).
    sql, params = (
        rows.annotate(document=vector).filter(document=query).values("pk").query.sql_with_params()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH hits AS MATERIALIZED ({sql}) SELECT * FROM hits ORDER BY 1 DESC LIMIT %s",
            [*params, RANKED_CANDIDATES],
        )
        return [row[0] for row in cursor.fetchall()]


def _matches_in_window(rows, vector, text: str, *, window: int) -> list[int]:
    window_sql, window_params = (
        rows.annotate(document=vector)
        .order_by("-pk")
        .values("pk", "document")[:window]
        .query.sql_with_params()
    )
    # The window is taken first, then matched: the planner cannot turn it into a walk over
    # every match (its estimate of a prefix query is a guess).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT w.pk FROM ({window_sql}) AS w(pk, document) "
            "WHERE w.document @@ to_tsquery(%s::regconfig, %s) ORDER BY w.pk DESC LIMIT %s",
            [*window_params, PG_CONFIG, text, RANKED_CANDIDATES],
        )
        return [row[0] for row in cursor.fetchall()]


class _postgres:
    @classmethod
    def topics(cls, *, sessions, words: list[str], limit: int) -> list[SearchHit]:
        topics = Topic.objects.filter(session__in=sessions)
        rows = cls._ranked(topics, TOPIC_VECTOR, "summary", words=words, limit=limit)
        return [_topic_hit(topic, topic.headline) for topic in rows]

    @classmethod
    def messages(cls, *, sessions, words: list[str], limit: int) -> list[SearchHit]:
        messages = Message.objects.filter(session__in=sessions).conversation()
        rows = cls._ranked(
            messages,
            MESSAGE_VECTOR,
            "content",
            words=words,
            limit=limit,
            window=RECENT_WINDOW,  # their vectors are stored: a window costs no parsing
            related=("topic",),
        )
        return [_message_hit(message, message.headline) for message in rows]

    @classmethod
    def matching_ids(cls, rows, vector, *, terms: list[str], limit: int) -> list[int]:
        """The ids of the rows whose ``vector`` matches any of ``terms`` (prefixes), best
        first: the candidates recall ranks itself."""
        return list(
            cls.matching_rows(rows, vector, terms=terms, limit=limit).values_list("pk", flat=True)
        )

    @staticmethod
    def matching_rows(rows, vector, *, terms: list[str], limit: int):
        """The rows whose ``vector`` matches any of ``terms`` (prefixes), best first."""
        query = SearchQuery(
            " | ".join(f"{term}:*" for term in terms), config=PG_CONFIG, search_type="raw"
        )
        return (
            rows.annotate(document=vector)
            .filter(document=query)
            .annotate(rank=SearchRank(vector, query))
            .order_by("-rank", "-pk")[:limit]
        )

    @staticmethod
    def _ranked(
        rows, vector, snippet_field: str, *, words: list[str], limit: int, window=0, related=()
    ) -> list:
        """The rows whose ``vector`` matches every word, best first, each with a headline:
        the newest RANKED_CANDIDATES matches found through the index, those ranked, and
        the headline written for the final page only."""
        # Words are \w+ runs, so they carry no tsquery operators; ':*' matches prefixes.
        text = " & ".join(f"{word}:*" for word in words)
        query = SearchQuery(text, config=PG_CONFIG, search_type="raw")
        candidates = _newest_matches(rows, vector, query, text, window=window, enough=limit)
        model = rows.model
        best = list(
            model.objects.filter(pk__in=candidates)
            .annotate(rank=SearchRank(vector, query))
            .order_by("-rank", "-pk")
            .values_list("pk", flat=True)[:limit]
        )
        headline = SearchHeadline(
            snippet_field,
            query,
            config=PG_CONFIG,
            start_sel="",
            stop_sel="",
            max_words=SNIPPET_WORDS,
            min_words=SNIPPET_WORDS // 2,
        )
        found = (
            model.objects.filter(pk__in=best).select_related(*related).annotate(headline=headline)
        ).in_bulk()
        return [found[pk] for pk in best if pk in found]


# --- SQLite: FTS5 tables kept by triggers ---------------------------------------------------


class _sqlite:
    @staticmethod
    def _match(words: list[str], joiner: str = " AND ") -> str:
        return joiner.join('"{}"*'.format(word.replace('"', '""')) for word in words)

    @classmethod
    def matching_ids(cls, table: str, *, terms: list[str], ids_sql, limit: int) -> list[int]:
        """The ids of ``ids_sql``'s rows whose ``table`` entry matches any of ``terms``."""
        inner_sql, inner_params = ids_sql
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH %s AND rowid IN ({inner_sql}) "
                f"ORDER BY bm25({table}), rowid DESC LIMIT %s",
                [cls._match(terms, " OR "), *inner_params, limit],
            )
            return [row[0] for row in cursor.fetchall()]

    @classmethod
    def _ranked_ids(cls, table: str, column: int, words: list[str], ids_sql, limit: int):
        inner_sql, inner_params = ids_sql
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT rowid, snippet({table}, {column}, '', '', '…', {SNIPPET_WORDS}) "
                f"FROM {table} WHERE {table} MATCH %s AND rowid IN ({inner_sql}) "
                f"ORDER BY bm25({table}), rowid DESC LIMIT %s",
                [cls._match(words), *inner_params, limit],
            )
            return cursor.fetchall()

    @classmethod
    def topics(cls, *, sessions, words: list[str], limit: int) -> list[SearchHit]:
        ids = Topic.objects.filter(session__in=sessions).values("pk").query.sql_with_params()
        ranked = cls._ranked_ids("memory_topic_search", 1, words, ids, limit)
        topics = Topic.objects.in_bulk([pk for pk, _ in ranked])
        return [_topic_hit(topics[pk], snippet) for pk, snippet in ranked if pk in topics]

    @classmethod
    def messages(cls, *, sessions, words: list[str], limit: int) -> list[SearchHit]:
        own = Message.objects.filter(session__in=sessions).conversation()
        ranked = cls._ranked_ids(
            "memory_message_search", 0, words, own.values("pk").query.sql_with_params(), limit
        )
        messages = own.select_related("topic").in_bulk([pk for pk, _ in ranked])
        return [_message_hit(messages[pk], snippet) for pk, snippet in ranked if pk in messages]


def _topic_hit(topic: Topic, snippet: str) -> SearchHit:
    return SearchHit(
        kind="topic",
        title=shown_topic_title(topic.title),
        snippet=snippet or topic.title,
        session_id=topic.session_id,
        topic_id=topic.pk,
    )


def _message_hit(message: Message, snippet: str) -> SearchHit:
    return SearchHit(
        kind="message",
        title=shown_topic_title(message.topic.title),
        snippet=snippet,
        session_id=message.session_id,
        topic_id=message.topic_id,
    )


# --- keeping the indexes --------------------------------------------------------------------

_SQLITE_TABLES = {
    # table: (source table, indexed columns)
    "memory_message_search": ("memory_message", ("content",)),
    "memory_topic_search": ("memory_topic", ("title", "summary")),
}


def ensure_search_index(*, using: str = "default") -> None:
    """Create what search needs if it is missing. Idempotent; runs after every migrate.

    On SQLite a table rebuilt by a later migration loses its triggers, so they are
    checked (and the index rebuilt from its table) every time, not only once.
    """
    from django.db import connections

    db = connections[using]
    if db.vendor == "postgresql":
        with db.schema_editor() as editor, db.cursor() as cursor:
            for statement in MESSAGE_VECTOR_SQL:
                cursor.execute(statement)
            for model, index in SEARCH_INDEXES.items():
                cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [index.name])
                if cursor.fetchone() is None:
                    editor.add_index(model, index)
    elif db.vendor == "sqlite":
        with db.cursor() as cursor:
            for table, (source, columns) in _SQLITE_TABLES.items():
                _ensure_fts_table(cursor, table, source, columns)


def _ensure_fts_table(cursor, table: str, source: str, columns: tuple[str, ...]) -> None:
    names = ", ".join(columns)
    old = ", ".join(f"old.{column}" for column in columns)
    new = ", ".join(f"new.{column}" for column in columns)
    delete = f"INSERT INTO {table}({table}, rowid, {names}) VALUES ('delete', old.id, {old});"
    insert = f"INSERT INTO {table}(rowid, {names}) VALUES (new.id, {new});"
    triggers = {
        f"{table}_ai": f"AFTER INSERT ON {source} BEGIN {insert} END",
        f"{table}_ad": f"AFTER DELETE ON {source} BEGIN {delete} END",
        f"{table}_au": f"AFTER UPDATE OF {names} ON {source} BEGIN {delete} {insert} END",
    }
    cursor.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [source]
    )
    present = {row[0] for row in cursor.fetchall()}
    if set(triggers) <= present:
        return
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5({names}, content='{source}', "
        f"content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
    )
    for name, body in triggers.items():
        cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")
    cursor.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
