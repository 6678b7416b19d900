"""Context-assembly benchmark: time and query count as the history grows.

Usage (from the repository root)::

    python -m bench.context_assembly [--sqlite] [--repeat 40] [--no-million] [--sizes N ...]

For 10², 10³, 10⁴, 10⁵ and (on PostgreSQL, unless ``--no-million``) 10⁶ messages in
one (agent, user, organization) scope of a member of the organization (so recall reads
it: the last user message's words are in every earlier topic), spread as real use spreads
them (sessions of five topics, about twenty messages a topic, tool
rounds and error records in the threads, a share of the closed topics promoted or
deprecated with summaries, archived notes, a long-running active topic holding a tenth
of the scope), it assembles the newest session's context repeatedly and reports the
median time, the SQL statements and Redis commands of a steady-state turn (persistent
memory served from the cache), and of a cold turn (cache just invalidated), and the CPU a
turn adds for recall by meaning (the query embedded, the stored vectors of the latest topics
and of the nearest topics' messages read and ranked: ``+meaning``, against ``cpu words``,
recall by words alone), as a table and as a last JSON line::

    {"bench": "context_assembly", "rows": [{"messages": N, "queries": Q, "ms_p50": T}, ...]}

It sets up its own database and drops it at the end: a dedicated PostgreSQL database
when a server answers on 127.0.0.1:5432 (``--sqlite`` forces a throwaway SQLite file),
and Redis database 14 under a key prefix of its own when Redis answers on
127.0.0.1:6379 (the in-process cache otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta

from bench.common import reachable, setup_django
from bench.counting import Counted

SIZES = (100, 1_000, 10_000, 100_000)
MILLION = 1_000_000  # PostgreSQL only (its messages written by generate_series)
MESSAGES_PER_TOPIC = 20
TOPICS_PER_SESSION = 5
BATCH = 5_000
EMBEDDING_CPU_MS_MAX = 10.0  # a turn's added CPU from embeddings (issue 46)


def configure(*, sqlite: bool) -> tuple[str | None, str | None, str]:
    """Point Django at a database and cache of the bench's own.

    Returns the PostgreSQL database or the SQLite directory it made, and a label."""
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ["DEBUG"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "driftless.settings"
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    pg_name = sqlite_dir = None
    if not sqlite and reachable(5432):
        import psycopg

        pg_name = f"bench_context_assembly_{os.getpid()}"
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{pg_name}"')
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{pg_name}"
    else:
        os.environ.pop("DATABASE_URL", None)
        sqlite_dir = tempfile.mkdtemp(prefix="bench-context-")
        os.environ["DRIFTLESS_VAR_DIR"] = sqlite_dir
    if reachable(6379):
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/14"
    else:
        os.environ.pop("REDIS_URL", None)

    setup_django()
    from django.conf import settings

    settings.CACHES["default"]["KEY_PREFIX"] = f"bench{os.getpid()}"
    database = "PostgreSQL" if pg_name else "SQLite"
    cache = "Redis" if os.environ.get("REDIS_URL") else "in-process"
    return pg_name, sqlite_dir, f"{database} database, {cache} cache"


def drop_database(pg_name: str | None, sqlite_dir: str | None) -> None:
    from django.db import connections

    connections.close_all()
    for connection in connections.all(initialized_only=True):
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None:
            close_pool()  # the pool keeps its connections open after close_all
    if sqlite_dir:
        shutil.rmtree(sqlite_dir, ignore_errors=True)
    if pg_name:
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def build_scope(*, agent, index: int, messages: int):
    """A user whose scope holds ``messages`` messages; returns the newest session."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from memory.models import ImportantInfo, Notes, Session, Topic

    user = get_user_model().objects.create_user(username=f"bench{index}")
    # A member, as every real user is: recall reads only the sessions the user may reach.
    agent.organization.members.add(user)
    active_share = max(10, messages // 10)
    spread = messages - active_share
    topic_sizes = [MESSAGES_PER_TOPIC] * (spread // MESSAGES_PER_TOPIC)
    if spread % MESSAGES_PER_TOPIC:
        topic_sizes.append(spread % MESSAGES_PER_TOPIC)
    # Each session: up to five closed topics, then its active one. Only the newest
    # session's active topic has messages: the long-running line of work being measured.
    chunks = [
        topic_sizes[i : i + TOPICS_PER_SESSION]
        for i in range(0, len(topic_sizes), TOPICS_PER_SESSION)
    ] or [[]]
    sessions = Session.objects.bulk_create(
        Session(user=user, agent=agent, organization_id=agent.organization_id, title=f"S{n}")
        for n in range(len(chunks))
    )
    epoch = timezone.now() - timedelta(days=3650)
    topics, plan_of_topic = [], []
    number = 0
    for session, closed in zip(sessions, chunks, strict=True):
        for size in closed:
            number += 1
            keep, deprecated = number % 7 == 0, number % 31 == 0
            in_memory = keep or deprecated
            topics.append(
                Topic(
                    session=session,
                    title=f"Topic {number}: a line of work",
                    summary=f"Topic {number}: decided X over Y (cost, latency); "
                    "keep Z for later; follow-ups owned by the user.",
                    keep_in_memory=keep,
                    deprecated=deprecated,
                    memory_changed_at=epoch + timedelta(minutes=number) if in_memory else None,
                    is_active=False,
                    origin=Topic.Origin.DRIFT,
                )
            )
            plan_of_topic.append((session, size))
        topics.append(Topic(session=session, title="", is_active=True))
        plan_of_topic.append((session, active_share if session is sessions[-1] else 0))
    topics = Topic.objects.bulk_create(topics, batch_size=BATCH)

    if connection.vendor == "postgresql":
        counts = _messages_in_sql(topics, plan_of_topic)
    else:
        counts = _messages_in_bulk(topics, plan_of_topic)
    for session in sessions:
        Session.objects.filter(pk=session.pk).update(message_count=counts.get(session.pk, 0))
    Notes.objects.bulk_create(
        (Notes(topic=t, content=f"notes of {t.title or 'the active topic'}") for t in topics),
        batch_size=BATCH,
    )
    Notes.objects.filter(topic__session__user=user, topic__is_active=False).archive()
    ImportantInfo.objects.create(
        user=user,
        agent=agent,
        organization_id=agent.organization_id,
        data={f"fact {k}": f"value {k}" for k in range(15)},
    )
    return sessions[-1], sum(counts.values()), len(topics)


def _messages_in_bulk(topics, plan_of_topic) -> dict[int, int]:
    from memory.models import Message

    rows, counts = [], {}
    for topic, (session, size) in zip(topics, plan_of_topic, strict=True):
        for offset in range(size):
            seq = counts.get(session.pk, 0) + 1
            counts[session.pk] = seq
            rows.append(_message(session, topic, seq, offset))
        if len(rows) >= BATCH:
            Message.objects.bulk_create(rows, batch_size=BATCH)
            rows = []
    Message.objects.bulk_create(rows, batch_size=BATCH)
    return counts


# The same messages as ``_message`` makes, written by PostgreSQL itself (generate_series):
# 10^6 rows in a minute or two instead of a quarter of an hour through the ORM.
_MESSAGES_SQL = """
INSERT INTO memory_message (session_id, topic_id, seq, role, content, tool_calls,
    tool_call_id, tool_name, model_name, stopped, memory_trace, recalled, versions,
    created_at)
SELECT p.session_id, p.topic_id, p.base + g.o + 1,
    CASE WHEN g.o %% 10 = 8 THEN 'assistant' WHEN g.o %% 10 = 9 THEN 'tool'
         WHEN g.o %% 97 = 96 THEN 'error' WHEN g.o %% 2 = 0 THEN 'user' ELSE 'assistant' END,
    CASE WHEN g.o %% 10 = 8 THEN ''
         WHEN g.o %% 10 = 9 THEN '{"topic_id": 1, "notes": "...", "archived": false}'
         WHEN g.o %% 97 = 96 THEN 'provider timed out'
         ELSE 'message ' || (p.base + g.o + 1) || ' ' || repeat('lorem ipsum ', 8) END,
    CASE WHEN g.o %% 10 = 8 THEN jsonb_build_array(jsonb_build_object(
        'id', 'call-' || (p.base + g.o + 1), 'type', 'function', 'function',
        jsonb_build_object('name', 'notes', 'arguments', '{"operation": "read"}')))
         ELSE '[]'::jsonb END,
    CASE WHEN g.o %% 10 = 9 THEN 'call-' || (p.base + g.o) ELSE '' END,
    CASE WHEN g.o %% 10 = 9 THEN 'notes' ELSE '' END,
    '', false, '{}'::jsonb, '', '[]'::jsonb, now()
FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[]) AS p(topic_id, session_id, base, size)
CROSS JOIN LATERAL generate_series(0, p.size - 1) AS g(o)
ORDER BY p.topic_id, g.o
"""


def _messages_in_sql(topics, plan_of_topic) -> dict[int, int]:
    from django.db import connection

    counts: dict[int, int] = {}
    columns: tuple[list, list, list, list] = ([], [], [], [])
    for topic, (session, size) in zip(topics, plan_of_topic, strict=True):
        if not size:
            continue
        base = counts.get(session.pk, 0)
        counts[session.pk] = base + size
        for column, value in zip(columns, (topic.pk, session.pk, base, size), strict=True):
            column.append(value)
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES_SQL, list(columns))
        cursor.execute("ANALYZE memory_message")
    return counts


def _message(session, topic, seq: int, offset: int):
    from memory.models import Message

    common = {"session": session, "topic": topic, "seq": seq}
    if offset % 10 == 8:  # an assistant tool call ...
        calls = [
            {
                "id": f"call-{seq}",
                "type": "function",
                "function": {"name": "notes", "arguments": '{"operation": "read"}'},
            }
        ]
        return Message(role=Message.Role.ASSISTANT, content="", tool_calls=calls, **common)
    if offset % 10 == 9:  # ... and its result
        return Message(
            role=Message.Role.TOOL,
            content='{"topic_id": 1, "notes": "...", "archived": false}',
            tool_call_id=f"call-{seq - 1}",
            tool_name="notes",
            **common,
        )
    if offset % 97 == 96:
        return Message(role=Message.Role.ERROR, content="provider timed out", **common)
    role = Message.Role.USER if offset % 2 == 0 else Message.Role.ASSISTANT
    return Message(role=role, content=f"message {seq} " + "lorem ipsum " * 8, **common)


def measure(session, *, repeat: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.actions.context import assemble_context
    from memory.stores.persistent import invalidate_persistent_memory

    cold_ms = []
    for _ in range(5):
        invalidate_persistent_memory(session.memory_scope_key)
        start = time.perf_counter()
        assemble_context(session=session)
        cold_ms.append((time.perf_counter() - start) * 1000)
    invalidate_persistent_memory(session.memory_scope_key)
    with CaptureQueriesContext(connection) as cold:
        assemble_context(session=session)
    for _ in range(3):
        assemble_context(session=session)  # warm-up
    warm_ms = []
    for _ in range(repeat):
        start = time.perf_counter()
        stack = assemble_context(session=session)
        warm_ms.append((time.perf_counter() - start) * 1000)
    with CaptureQueriesContext(connection) as warm, Counted() as counted:
        assemble_context(session=session)
    return {
        **embedding_cost(session, repeat=repeat),
        "queries": len(warm.captured_queries),
        "redis": counted.redis,
        "queries_cold": len(cold.captured_queries),
        "ms_p50": statistics.median(warm_ms),
        "ms_p90": statistics.quantiles(warm_ms, n=10)[-1],
        "ms_cold": statistics.median(cold_ms),
        "window": len([m for m in stack.messages if m["role"] != "system"]),
        # Recalled passages in the request: recall must find some, or it measures nothing.
        "recalled": sum(
            m["content"].count("\n- ")
            for m in stack.messages
            if m["role"] == "system" and m["content"].startswith("## Recalled")
        ),
        "dropped": len(stack.dropped),
    }


def store_vectors(session) -> None:
    """The vectors the drift check would have stored: of the topics recall by meaning
    reads (memory/stores/recall/vectors.py: the scope's latest live ones, the current one
    left out) and of their messages."""
    from memory.models import Message, Topic
    from memory.stores.recall.ranking import recall_sessions
    from memory.stores.recall.vectors import VECTOR_TOPICS
    from memory.stores.vectors import message_vectors, topic_vectors

    live = Topic.objects.filter(session__in=recall_sessions(session=session), deprecated=False)
    current = live.exclude(session=session, is_active=True)
    topics = list(current.order_by("-pk")[:VECTOR_TOPICS])
    topic_vectors(topics)
    message_vectors(Message.objects.filter(topic__in=topics).conversation())


def embedding_cost(session, *, repeat: int) -> dict:
    """A turn's added CPU from embeddings: the process's CPU time of an assembly with
    recall by meaning, minus one by words alone (medians), the query embedded afresh
    every turn (the encoder's cache emptied)."""
    from django.conf import settings

    from memory.actions.context import assemble_context
    from memory.text import embeddings

    store_vectors(session)
    cpu = {}
    for meaning in (False, True):
        settings.RECALL_BY_MEANING = meaning
        assemble_context(session=session)  # warm-up
        spent = []
        for _ in range(repeat):
            embeddings._cache.clear()
            start = time.process_time()
            assemble_context(session=session)
            spent.append((time.process_time() - start) * 1000)
        cpu[meaning] = statistics.median(spent)
    settings.RECALL_BY_MEANING = True
    return {"cpu_ms_words": cpu[False], "cpu_ms_added": cpu[True] - cpu[False]}


def measure_sizes(agent, sizes, *, repeat: int) -> list[dict]:
    rows = []
    for index, size in enumerate(sizes):
        session, messages, topics = build_scope(agent=agent, index=index, messages=size)
        rows.append({"messages": messages, "topics": topics, **measure(session, repeat=repeat)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sqlite", action="store_true", help="use a throwaway SQLite file")
    parser.add_argument("--repeat", type=int, default=40, help="timed assemblies per size")
    parser.add_argument(
        "--no-million", action="store_true", help="skip the 10^6 row (PostgreSQL only)"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="only these sizes (messages), e.g. 10000 100000"
    )
    args = parser.parse_args()

    pg_name, sqlite_dir, label = configure(sqlite=args.sqlite)
    try:
        from django.core.cache import cache
        from django.core.management import call_command

        from memory.models import Agent, Organization

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        organization = Organization.objects.create(name="Bench", slug="bench")
        agent = Agent.objects.create(
            organization=organization, name="Bench", soul="You are Bench.", skills="Timing."
        )
        sizes = SIZES if args.no_million or not pg_name else (*SIZES, MILLION)
        if args.sizes:
            sizes = tuple(size for size in args.sizes if pg_name or size < MILLION)
        rows = measure_sizes(agent, sizes, repeat=args.repeat)
        if hasattr(cache, "delete_pattern"):
            cache.delete_pattern("*")
    finally:
        drop_database(pg_name, sqlite_dir)
    return print_report(
        rows, label=label, repeat=args.repeat, seconds=time.perf_counter() - started
    )


def print_report(rows: list[dict], *, label: str, repeat: int, seconds: float) -> int:
    """The table and the last JSON line; 0 when the assembly time holds, else 1."""
    print(f"context assembly ({label}; {repeat} warm turns per size, {seconds:.0f} s in all)")
    header = (
        "messages",
        "topics",
        "queries",
        "redis",
        "cold q",
        "p50 ms",
        "p90 ms",
        "cold ms",
        "window",
        "dropped",
        "cpu words",
        "+meaning",
        "recalled",
    )
    print("  ".join(f"{h:>9}" for h in header))
    for row in rows:
        cells = [
            row["messages"],
            row["topics"],
            row["queries"],
            row["redis"],
            row["queries_cold"],
            f"{row['ms_p50']:.2f}",
            f"{row['ms_p90']:.2f}",
            f"{row['ms_cold']:.2f}",
            row["window"],
            row["dropped"],
            f"{row['cpu_ms_words']:.2f}",
            f"{row['cpu_ms_added']:.2f}",
            row["recalled"],
        ]
        print("  ".join(f"{c:>9}" for c in cells))
    ratio = rows[-1]["ms_p50"] / rows[0]["ms_p50"]
    same_queries = len({row["queries"] for row in rows}) == 1
    recalled = all(row["recalled"] for row in rows)
    print(
        f"p50 at {rows[-1]['messages']:,} / p50 at {rows[0]['messages']:,}: {ratio:.2f}x "
        f"(must be <= 2); same query count on every row: {same_queries}; "
        f"recall found passages on every row: {recalled}"
    )
    print(
        json.dumps(
            {
                "bench": "context_assembly",
                "rows": [
                    {
                        "messages": r["messages"],
                        "queries": r["queries"],
                        "redis": r["redis"],
                        "ms_p50": round(r["ms_p50"], 3),
                        "cpu_ms_added_by_embeddings": round(r["cpu_ms_added"], 3),
                    }
                    for r in rows
                ],
            }
        )
    )
    added = rows[-1]["cpu_ms_added"]
    print(
        f"CPU a turn adds for recall by meaning at {rows[-1]['messages']:,} messages: "
        f"{added:.2f} ms (must be < {EMBEDDING_CPU_MS_MAX:g})"
    )
    return 0 if ratio <= 2 and same_queries and recalled and added < EMBEDDING_CPU_MS_MAX else 1


if __name__ == "__main__":
    sys.exit(main())
