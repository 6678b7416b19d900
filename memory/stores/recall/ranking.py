"""Recall: the agent's search of its past chats with this user (the ``recall`` tool).

What the agent cannot see any more: the user's own messages, the titles and summaries of
topics in any memory state (most topics are never promoted), and archived notes, across
every session of the (agent, user, organization) scope, never beyond it, and only while
the user may still reach those sessions (``Session.objects.owned_by``). The current topic
is left out: it is the conversation the agent is in.

A query's words are cut as the drift detector cuts them (Unicode words; stop words of the
query's language and of English dropped), each reduced to the part it shares with its
Snowball stem, so "booked" finds "booking"; any word may match. The database's full-text
index (memory/stores/search.py: PostgreSQL text search, SQLite FTS5) picks the
candidates; for the tool they are ranked here, the same on both engines, by how many of
the query's words each holds (a word rare among the candidates weighs more), newest first
among equals. ``read_past_chat`` returns the turns around a hit by its id.

The passages recalled into every turn's context (memory/actions/context.py) search the
assistant's replies too, show each message with the other half of its exchange
(``exchanges``), and rank the messages by BM25 (``bm25_messages``), topics and notes after
them: how often a word occurs in a message, against the message's length, weighted by how
rare the word is in the scope's past chats, so a word common in them ("end" of "end up")
weighs little beside the rare one asked about ("tile"). It is computed here, the same on
both engines, since PostgreSQL's ``ts_rank`` weighs no word by its rarity. On the tune
half of bench/data/memory-qa-*.jsonl (bench.memory_qa.reach, no model involved: does
the gold answer reach the prompt?) the answer reached the prompt for 58 of 67 answerable
questions on both engines, against 52 with the tool's order (and 57 and 55 for the
retrieval baseline's, the index's own, on SQLite and PostgreSQL).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Exists, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.lib.errors import InvalidInput
from memory.lib.text import one_line, shown_topic_title
from memory.models import Message, Notes, Organization, Session, Topic
from memory.stores.recall.query import (
    near_rows,
    scoped_messages,
    time_limited_recall,
    topic_candidates,
)
from memory.stores.recall.vectors import fuse, vector_messages
from memory.stores.search import (
    _WORD,
    MESSAGE_VECTOR,
    TOPIC_VECTOR,
    _postgres,
    _sqlite,
    check_search_query,
)
from memory.text.stats import ENGLISH_STOPWORDS, language_of, stem, stopwords

RECALL_DEFAULT_HITS = 5
RECALL_MAX_HITS = 10
RECALL_CANDIDATES = 60  # per kind, from the index, before ranking
TOPICS_SEARCHED = 300  # the scope's newest topics (and their notes) a recall reads
RECALL_MAX_TERMS = 12  # a query's content words searched for (stopwords never count)
RECALL_SNIPPET_CHARS = 300
RECALL_READ_AROUND = 4  # conversation messages before and after a message read by id
RECALL_READ_TOPIC_MESSAGES = 12
RECALL_TURN_CHARS = 1_000
RECALL_REPLY_CHARS = 240  # the other half of a recalled message's exchange
REPLY_SEARCH_SPAN = 6  # messages either side where that half may be (past a tool round)

RecallKind = Literal["message", "topic", "notes"]


@dataclass(frozen=True)
class RecallHit:
    kind: RecallKind
    session_id: int
    topic_id: int
    message_id: int | None  # the user's message (kind "message"), for ``read``
    date: str  # the session's day, YYYY-MM-DD
    topic_title: str
    memory_state: str  # the topic's: none, promoted or deprecated
    snippet: str
    score: float
    at: datetime = field(compare=False)  # when it was said or written: newer wins a tie
    seq: int | None = field(default=None, compare=False)  # the message's, in its session
    role: str = field(default="", compare=False)  # the message's: user or assistant

    def as_dict(self) -> dict:
        data = {
            "kind": self.kind,
            "date": self.date,
            "topic": self.topic_title,
            "topic_id": self.topic_id,
            "session_id": self.session_id,
            "snippet": self.snippet,
        }
        if self.message_id is not None:
            data["message_id"] = self.message_id
        if self.memory_state != "none":
            data["memory_state"] = self.memory_state
        return data


def recall_terms(query: object) -> list[str]:
    """The terms a recall query searches for, its first ``RECALL_MAX_TERMS`` content words
    stemmed (SearchError when it has no word). The cap counts content words, not words: a
    question's second half ("... and going back to climbing twice a week?") is searched
    for as much as its first."""
    words = check_search_query(query, max_words=None)
    language = language_of(str(query))
    stop = stopwords(language) | ENGLISH_STOPWORDS
    content = [word for word in words if word not in stop and (len(word) > 1 or word.isdigit())]
    terms: list[str] = []
    for word in content or words:
        term = _stem_prefix(word, language)
        if term not in terms:
            terms.append(term)
    return terms[:RECALL_MAX_TERMS]


def _stem_prefix(word: str, language: str) -> str:
    """The part of ``word`` it shares with its stem ("booking" -> "book", "pottery" ->
    "potter"), never shorter than three characters: a prefix the index matches."""
    stemmed = stem(word, language)
    shared = 0
    for a, b in zip(word, stemmed, strict=False):
        if a != b:
            break
        shared += 1
    return word[: max(shared, min(3, len(word)))]


def recall_sessions(*, session: Session):
    """The sessions recall may read for ``session``: its scope's, while its user may
    (``Session.objects.owned_by``'s rule, said with the ids the session holds: no query
    for the user)."""
    user_id, organization_id = session.user_id, session.organization_id
    # Checked once, not per session (the planner runs an uncorrelated EXISTS one time).
    member = Organization.members.through.objects.filter(
        organization_id=organization_id, user_id=user_id
    )
    active = get_user_model().objects.filter(pk=user_id, is_active=True)
    mine = Session.objects.filter(Exists(member), Exists(active))
    return mine.in_scope(
        agent_id=session.agent_id, user_id=session.user_id, organization_id=session.organization_id
    )


def search_past_chats(
    *,
    session: Session,
    query: str,
    limit: int = RECALL_DEFAULT_HITS,
    exclude_topic_id: int | None = None,
    replies: bool = False,
    messages_first: bool = False,
    live_only: bool = False,
) -> list[RecallHit]:
    """The best ``limit`` hits for ``query`` in the past chats of ``session``'s scope, the
    topic ``exclude_topic_id`` (the current one) left out; ``replies`` searches the
    assistant's text replies too, not only the user's messages; ``messages_first`` puts
    the messages first, ranked by BM25, then the topics and notes; ``live_only`` leaves
    the deprecated topics out (what the user reversed is never quoted as live)."""
    terms = recall_terms(query)
    limit = max(1, min(limit, RECALL_MAX_HITS))
    sessions = recall_sessions(session=session)
    with time_limited_recall():
        if connection.vendor == "postgresql":  # bounded by the scope: one statement
            found = scoped_messages(
                sessions=sessions,
                user_id=session.user_id,
                terms=terms,
                exclude_topic_id=exclude_topic_id,
                replies=replies,
            )
            if live_only:
                found = [message for message in found if not message.topic.deprecated]
            if messages_first:
                found = bm25_ranked(found, terms=terms, limit=RECALL_CANDIDATES)
        else:
            rank = bm25_messages if messages_first else indexed_messages
            messages = _scope_messages(sessions, exclude_topic_id, live_only, replies)
            found = rank(messages, terms=terms, limit=RECALL_CANDIDATES)
        # The scope's newest topics only (their vectors, their titles and summaries, their
        # notes): bounded, whatever the history (an older topic's messages are still found,
        # through the messages' index).
        recent = _recent_sessions(sessions)
        newest = _newest_topics(recent, exclude_topic_id)
        by_meaning: set[int] = set()
        if messages_first and settings.RECALL_BY_MEANING:  # the context's passages: hybrid
            nearest = vector_messages(
                sessions=recent,
                exclude_topic_id=exclude_topic_id,
                live_only=live_only,
                query=query,
                replies=replies,
                limit=limit * 4,
            )
            by_meaning = set(nearest.ids)
            found = fuse(found, nearest, shown=limit)
        candidates = [("message", message, message.content) for message in found]
        if connection.vendor == "postgresql":  # the topics' and the notes': one statement
            candidates += topic_candidates(
                newest=newest, terms=terms, live_only=live_only, limit=RECALL_CANDIDATES
            )
        else:
            topics = Topic.objects.filter(pk__in=RawSQL(*newest))
            if live_only:
                topics = topics.exclude(deprecated=True)
            candidates += _topic_candidates(topics, terms)
            candidates += _notes_candidates(topics, terms)
    hits = _ranked_hits(candidates, terms, keep=by_meaning)
    if messages_first:  # a stable sort: the topics and notes keep their order, after them
        position = {message.pk: index for index, message in enumerate(found)}
        hits.sort(key=lambda hit: position.get(hit.message_id, len(position)))
    return hits[:limit]


def _scope_messages(sessions, exclude_topic_id: int | None, live_only: bool, replies: bool):
    """The messages recall searches on SQLite: the scope's, in its topics but the excluded
    one (and the deprecated ones, ``live_only``), the user's alone unless ``replies``."""
    topics = Topic.objects.filter(session__in=sessions)
    if exclude_topic_id is not None:
        topics = topics.exclude(pk=exclude_topic_id)
    if live_only:
        topics = topics.exclude(deprecated=True)
    messages = Message.objects.filter(topic__in=topics)
    return messages if replies else messages.filter(role=Message.Role.USER)


def _recent_sessions(sessions):
    """The ids of the scope's newest ``TOPICS_SEARCHED`` sessions, as a subquery (the
    ``(agent, user, organization, id)`` index read backwards: the scope's other sessions
    are never read)."""
    return sessions.order_by("-pk").values("pk")[:TOPICS_SEARCHED]


def _newest_topics(recent, exclude_topic_id: int | None) -> tuple[str, tuple]:
    """The statement (and its parameters) of the ids of the scope's newest
    ``TOPICS_SEARCHED`` topics, from its ``recent`` sessions (``_recent_sessions``). Written
    out around ``recent``'s statement, compiled once here: built by the ORM, the filter on a
    sliced subquery of a subquery cost a turn more CPU than running it (issue 43)."""
    sessions, params = recent.query.sql_with_params()
    newest = (
        f"SELECT t.id FROM memory_topic AS t WHERE t.session_id IN ({sessions}) AND t.id <> %s "
        f"ORDER BY t.id DESC LIMIT {TOPICS_SEARCHED}"
    )
    return newest, (*params, exclude_topic_id or 0)


def indexed_messages(messages, *, terms: list[str], limit: int) -> list[Message]:
    """The conversation messages of ``messages`` that hold any of ``terms``, in the full-text
    index's own order (BM25 on SQLite, ``ts_rank`` on PostgreSQL), with topic and session."""
    ids = _matching_ids(
        messages.conversation(), MESSAGE_VECTOR, "memory_message_search", terms, limit
    )
    found = Message.objects.select_related("topic", "session").in_bulk(ids)
    return [found[pk] for pk in ids if pk in found]


BM25_K1 = 1.2  # how soon more of one word stops counting
BM25_B = 0.75  # how much a long message is discounted
BM25_COUNTED = 500  # the matches a word's rarity is counted over (more: as common as that)


def bm25_messages(messages, *, terms: list[str], limit: int) -> list[Message]:
    """The conversation messages of ``messages`` that hold any of ``terms``, best first by
    BM25, with topic and session: each term's best ``limit`` matches by the index are the
    candidates (a rare term's few matches are never crowded out by a common one's), and a
    term's rarity is counted among the scope's messages. ``len(terms) + 2`` queries."""
    rows = messages.conversation()
    total = rows.count()
    ids: dict[int, None] = {}  # in order, once each
    weight: dict[str, float] = {}  # each term's, as the fold sees it
    for term in terms:
        matching = _matching_ids(
            rows, MESSAGE_VECTOR, "memory_message_search", [term], BM25_COUNTED
        )
        count = len(matching)
        weight[_fold_accents(term)] = math.log(1 + (total - count + 0.5) / (count + 0.5))
        ids.update(dict.fromkeys(matching[:limit]))
    found = Message.objects.select_related("topic", "session").in_bulk(list(ids))
    return _bm25_order(found, weight, limit=limit)


def bm25_ranked(found: list[Message], *, terms: list[str], limit: int) -> list[Message]:
    """``found`` (recall's candidates, memory/stores/recall/query.py) best first by BM25,
    each term's rarity read among them: no count over the scope."""
    by_pk = {message.pk: message for message in found}
    words = {pk: _folded_words(message.content) for pk, message in by_pk.items()}
    lines = {pk: _word_line(w) for pk, w in words.items()}
    total = len(by_pk)
    weight = {}
    for term in map(_fold_accents, terms):
        count = sum(f" {term}" in line for line in lines.values())
        weight[term] = math.log(1 + (total - count + 0.5) / (count + 0.5))
    return _bm25_order(by_pk, weight, limit=limit, words=words, lines=lines)


def _bm25_order(
    found: dict, weight: dict[str, float], *, limit: int, words=None, lines=None
) -> list:
    if words is None:
        words = {pk: _folded_words(message.content) for pk, message in found.items()}
    if lines is None:
        lines = {pk: _word_line(w) for pk, w in words.items()}
    average = sum(map(len, words.values())) / max(1, len(words)) or 1.0

    def score(pk: int) -> float:
        length = len(words[pk])
        total_score = 0.0
        for term, idf in weight.items():
            occurs = lines[pk].count(f" {term}")  # its words that start with the term
            if occurs:
                scale = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
                total_score += idf * occurs * (BM25_K1 + 1) / (occurs + scale)
        return total_score

    ranked = sorted(found, key=lambda pk: (score(pk), found[pk].created_at, pk), reverse=True)
    return [found[pk] for pk in ranked[:limit]]


def _matching_ids(rows, vector, sqlite_table: str, terms: list[str], limit: int) -> list[int]:
    """The ids of ``rows`` holding any of ``terms``, in the full-text index's own order:
    PostgreSQL's ``vector``, or SQLite's FTS5 table ``sqlite_table``."""
    if connection.vendor == "postgresql":
        return _postgres.matching_ids(rows, vector, terms=terms, limit=limit)
    ids_sql = rows.values("pk").query.sql_with_params()
    return _sqlite.matching_ids(sqlite_table, terms=terms, ids_sql=ids_sql, limit=limit)


def _topic_candidates(topics, terms: list[str]):
    """The topics of ``topics`` that hold any term, best first, with their sessions (SQLite;
    PostgreSQL: ``topic_candidates``)."""
    ids = _matching_ids(topics, TOPIC_VECTOR, "memory_topic_search", terms, RECALL_CANDIDATES)
    found = Topic.objects.select_related("session").in_bulk(ids)
    return [
        ("topic", found[pk], f"{found[pk].title}\n{found[pk].summary}") for pk in ids if pk in found
    ]


def _notes_candidates(topics, terms: list[str]):
    """Notes have no index: the few documents of ``topics`` are matched word by word, any
    term (SQLite; PostgreSQL: ``topic_candidates``)."""
    matches = Q()
    for term in terms:
        matches |= Q(content__icontains=term)
    rows = (
        Notes.objects.filter(topic__in=topics)
        .exclude(content="")
        .filter(matches)
        .select_related("topic", "topic__session")
        .order_by("-pk")[:RECALL_CANDIDATES]
    )
    return [("notes", notes, notes.content) for notes in rows]


def _ranked_hits(candidates, terms: list[str], keep: set[int] = frozenset()) -> list[RecallHit]:
    """The candidates that hold a query word (or whose message pk is in ``keep``: found
    by meaning), scored by the share of the query's words they hold."""
    lines = [_word_line(_folded_words(text)) for _, _, text in candidates]
    folded_terms = [_fold_accents(term) for term in terms]
    present = [{term for term in folded_terms if f" {term}" in line} for line in lines]
    pool = max(1, len(candidates))
    weight = {
        term: 1.0 + _log(pool / (1 + sum(term in found for found in present)))
        for term in folded_terms
    }
    hits = []
    for (kind, row, text), found in zip(candidates, present, strict=True):
        if not found and not (kind == "message" and row.pk in keep):
            continue  # the index matched a word the fold sees otherwise: not a hit
        score = sum(weight[term] for term in found) / sum(weight.values())
        hits.append(_hit(kind, row, text, folded_terms, score))
    hits.sort(key=lambda hit: (round(hit.score, 6), hit.at, hit.topic_id), reverse=True)
    return hits


def _hit(kind: RecallKind, row, text: str, terms: list[str], score: float) -> RecallHit:
    topic = row if kind == "topic" else row.topic
    session = row.session if kind == "message" else topic.session  # each loaded with its row
    if kind == "topic":
        text = topic.summary or topic.title
    return RecallHit(
        kind=kind,
        session_id=session.pk,
        topic_id=topic.pk,
        message_id=row.pk if kind == "message" else None,
        date=day_of(session.created_at),
        topic_title=shown_topic_title(topic.title),
        memory_state=topic.memory_state.value,
        snippet=_snippet(text, terms),
        score=score,
        at=row.updated_at if kind == "notes" else row.created_at,
        seq=row.seq if kind == "message" else None,
        role=row.role if kind == "message" else "",
    )


def exchanges(hits: list[RecallHit], terms: Sequence[str] = ()) -> dict[int, tuple[int, str, str]]:
    """For each message hit, the other half of its exchange: the assistant's text reply
    to a user's message (the topic's next conversation message, past any tool round), or
    the user's message an assistant's reply answered (the one before it). Keyed by the
    hit's message id: that message's id, role, and text on one line cut to
    ``RECALL_REPLY_CHARS`` around the first of ``terms`` (the query's, as ``recall_terms``
    cuts them) it holds, from its start when it holds none. One query."""
    asked = [hit for hit in hits if hit.seq is not None]
    if not asked:
        return {}
    terms = [_fold_accents(term) for term in terms]
    near: dict[int, list[_Near]] = {}
    for row in _near_rows([(hit.topic_id, hit.seq) for hit in asked]):
        near.setdefault(row.topic_id, []).append(row)
    found = {}
    for hit in asked:
        rows = near.get(hit.topic_id, [])
        if hit.role == Message.Role.USER:
            other = next((row for row in rows if row.seq > hit.seq), None)
            wanted_role = Message.Role.ASSISTANT
        else:
            other = next((row for row in reversed(rows) if row.seq < hit.seq), None)
            wanted_role = Message.Role.USER
        if other is not None and other.role == wanted_role and other.content:
            text = _snippet(other.content, terms, RECALL_REPLY_CHARS)
            found[hit.message_id] = (other.pk, other.role, text)
    return found


class _Near(NamedTuple):
    """A message near a hit, as ``exchanges`` reads it."""

    pk: int
    topic_id: int
    seq: int
    role: str
    content: str


def _near_rows(places: list[tuple[int, int]]) -> list[_Near]:
    """The conversation messages at most ``REPLY_SEARCH_SPAN`` from each ``(topic_id,
    seq)`` place, in ``seq`` order: one statement (written out on PostgreSQL)."""
    if connection.vendor == "postgresql":
        rows = near_rows(places, span=REPLY_SEARCH_SPAN)
    else:
        wanted = Q()
        for topic_id, seq in places:
            wanted |= Q(
                topic_id=topic_id,
                seq__gte=seq - REPLY_SEARCH_SPAN,
                seq__lte=seq + REPLY_SEARCH_SPAN,
            )
        near = Message.objects.filter(wanted).conversation().order_by("seq")
        rows = near.values_list("pk", "topic_id", "seq", "role", "content")
    return [_Near(*row) for row in rows]


def day_of(moment) -> str:
    """A stored time as the day people read, ``2026-03-02`` (the server's time zone)."""
    return timezone.localtime(moment).date().isoformat()


def _snippet(text: str, terms: list[str], limit: int = RECALL_SNIPPET_CHARS) -> str:
    """``text`` on one line, around its first matching word when it is long."""
    text = one_line(text)
    if len(text) <= limit:
        return text
    folded = _fold_accents(text.casefold())
    prefixes = tuple(terms)
    first = next(
        (match.start() for match in _WORD.finditer(folded) if match.group().startswith(prefixes)),
        0,
    )
    start = max(0, first - limit // 4)
    if start:
        start = text.find(" ", start) + 1 or start
    piece = one_line(text[start:], limit - (1 if start else 0), at_word=True)
    return ("…" if start else "") + piece


def _folded_words(text: str) -> list[str]:
    return _WORD.findall(_fold_accents(text.casefold()))


def _word_line(words: list[str]) -> str:
    """The words behind one space each: ``f" {term}" in line`` says whether a word starts
    with ``term`` (a word holds no space), and ``line.count(f" {term}")`` how many do."""
    return " " + " ".join(words) if words else ""


def _fold_accents(text: str) -> str:
    if text.isascii():  # nothing to decompose or drop
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _log(value: float) -> float:
    return math.log(value) if value > 0 else 0.0


# --- recall's read: the turns around a hit ---------------------------------------------------


class RecallNotFound(InvalidInput):
    """An id recall cannot read: not in the scope, or not there at all (the same words)."""

    def __init__(self, what: str, ident: object) -> None:
        super().__init__(f"no {what} {ident} in your past chats with this user", field=what)


def read_past_chat(
    *, session: Session, message_id: int | None = None, topic_id: int | None = None
) -> dict:
    """The conversation around a message (``RECALL_READ_AROUND`` each side, in its topic),
    or a topic's title, summary, notes and first messages; only inside the scope."""
    sessions = recall_sessions(session=session)
    if message_id is not None:
        message = (
            Message.objects.filter(session__in=sessions, pk=message_id)
            .conversation()
            .select_related("topic", "session")
            .first()
        )
        if message is None:
            raise RecallNotFound("message_id", message_id)
        conversation = Message.objects.filter(topic_id=message.topic_id).conversation()
        before = list(
            conversation.filter(seq__lt=message.seq).order_by("-seq")[:RECALL_READ_AROUND]
        )
        after = list(conversation.filter(seq__gt=message.seq).order_by("seq")[:RECALL_READ_AROUND])
        turns = [*reversed(before), message, *after]
        return {**_topic_head(message.topic), "turns": [_turn(turn) for turn in turns]}
    if topic_id is None:
        raise InvalidInput("give the message_id or the topic_id of a hit", field="message_id")
    topic = (
        Topic.objects.filter(session__in=sessions, pk=topic_id).select_related("session").first()
    )
    if topic is None:
        raise RecallNotFound("topic_id", topic_id)
    conversation = Message.objects.filter(topic_id=topic.pk).conversation().order_by("seq")
    turns = list(conversation[: RECALL_READ_TOPIC_MESSAGES + 1])
    notes = Notes.objects.filter(topic=topic).order_by("-pk").values_list("content", flat=True)
    data = {
        **_topic_head(topic),
        "summary": topic.summary,
        "notes": one_line(notes.first() or "", RECALL_TURN_CHARS),
        "turns": [_turn(turn) for turn in turns[:RECALL_READ_TOPIC_MESSAGES]],
    }
    if len(turns) > RECALL_READ_TOPIC_MESSAGES:
        data["more_turns"] = conversation.count() - RECALL_READ_TOPIC_MESSAGES
    return data


def _topic_head(topic: Topic) -> dict:
    return {
        "topic_id": topic.pk,
        "topic": shown_topic_title(topic.title),
        "session_id": topic.session_id,
        "date": day_of(topic.session.created_at),
        "memory_state": topic.memory_state.value,
    }


def _turn(message: Message) -> dict:
    return {
        "message_id": message.pk,
        "role": message.role,
        "date": day_of(message.created_at),
        "text": one_line(message.content, RECALL_TURN_CHARS),
    }
