"""Search benchmark: a common-word search over a long history, before and after.

Usage (from the repository root)::

    python -m bench.search [--messages 200000] [--repeat 30] [--baseline-repeat 3]

One user whose sessions hold ``--messages`` messages (bulk-created in a PostgreSQL
database of the bench's own, dropped at the end), each about thirty words drawn from a
vocabulary where the common word ("project") is in about a third of the messages. It times
``search_memory`` (the product's search path: what ``/search/`` and the search API call)
for the common word, a two-word query and a rare word, and, as the baseline in the same
run on the same rows, the search as it was before (``to_tsvector`` over an expression
index, ``ts_rank`` and ``ts_headline`` computed for every matching row). Prints a table and,
last, one JSON line::

    {"bench": "search", "messages": N, "target_p95_ms": 200, "rows": [...], "ok": true}

It also times a turn's recall (``search_past_chats`` as context assembly calls it) for
twelve common words, by the database time of its statements. Exits non-zero when the
common-word search's p95 is 200 ms or more, or the recall's database time p95 50 ms or
more. Needs PostgreSQL on
127.0.0.1:5432 (the embedded SQLite mode searches through FTS5, not measured here).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

from bench.common import reachable, setup_django

TARGET_P95_MS = 200.0
RECALL_TARGET_MS = 50.0  # a turn's recall, database time, twelve common words
RECALL_QUERY = (
    "database cache latency index query schema migration review design budget deadline release"
)
MESSAGES_PER_TOPIC = 20
TOPICS_PER_SESSION = 10
BATCH = 5_000
COMMON = "project"
QUERIES = (("common word", COMMON), ("two words", "project deadline"), ("rare word", "zanzibar"))
WORDS = (
    "the a we to and of for in on is it that this with our next plan team week "
    "database cache latency index query schema migration review design budget "
    "deadline release customer feedback bug fix test deploy server client api "
    "memory topic summary note fact meeting call email draft report metric goal"
).split()


def configure() -> str:
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ["DEBUG"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "driftless.settings"
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    import psycopg

    name = f"bench_search_{os.getpid()}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    setup_django()
    return name


def drop_database(name: str) -> None:
    from django.db import connections

    connections.close_all()
    for connection in connections.all(initialized_only=True):
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None:
            close_pool()  # the pool keeps its connections open after close_all
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _content(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(28)]
    if rng.random() < 0.34:
        words[rng.randrange(len(words))] = COMMON
    if n % 5_000 == 17:
        words[0] = "zanzibar"
    return f"message {n}: " + " ".join(words) + "."


def build_history(*, user, agent, messages: int) -> None:
    from memory.models import Message, Session, Topic

    rng = random.Random(20)
    topics_needed = -(-messages // MESSAGES_PER_TOPIC)
    sessions = Session.objects.bulk_create(
        Session(user=user, agent=agent, organization_id=agent.organization_id, title=f"S{n}")
        for n in range(-(-topics_needed // TOPICS_PER_SESSION))
    )
    topics = Topic.objects.bulk_create(
        (
            Topic(
                session=sessions[n // TOPICS_PER_SESSION],
                title=f"Topic {n}: planning the {rng.choice(WORDS)}",
                summary=" ".join(rng.choice(WORDS) for _ in range(20)),
                is_active=n % TOPICS_PER_SESSION == TOPICS_PER_SESSION - 1,
            )
            for n in range(topics_needed)
        ),
        batch_size=BATCH,
    )
    rows, counts = [], {}
    for n in range(messages):
        topic = topics[n // MESSAGES_PER_TOPIC]
        seq = counts.get(topic.session_id, 0) + 1
        counts[topic.session_id] = seq
        role = Message.Role.USER if n % 2 == 0 else Message.Role.ASSISTANT
        rows.append(
            Message(
                session_id=topic.session_id,
                topic=topic,
                seq=seq,
                role=role,
                content=_content(rng, n),
            )
        )
        if len(rows) >= BATCH:
            Message.objects.bulk_create(rows)
            rows = []
    Message.objects.bulk_create(rows)
    for session_id, count in counts.items():
        Session.objects.filter(pk=session_id).update(message_count=count)


def baseline_search(*, user, query: str, limit: int = 20) -> list:
    """The search before issue 20: ranked and headlined on every matching row."""
    from django.contrib.postgres.search import (
        SearchHeadline,
        SearchQuery,
        SearchRank,
        SearchVector,
    )

    from memory.models import Message, Session, Topic
    from memory.stores.search import PG_CONFIG, TOPIC_VECTOR, check_search_query

    words = check_search_query(query)
    sessions = Session.objects.owned_by(user)
    tsquery = SearchQuery(" & ".join(f"{w}:*" for w in words), config=PG_CONFIG, search_type="raw")
    hits = []
    for rows, vector, field in (
        (Topic.objects.filter(session__in=sessions), TOPIC_VECTOR, "summary"),
        (
            Message.objects.filter(session__in=sessions).conversation(),
            SearchVector("content", config=PG_CONFIG),
            "content",
        ),
    ):
        headline = SearchHeadline(
            field, tsquery, config=PG_CONFIG, start_sel="", stop_sel="", max_words=16, min_words=8
        )
        hits += list(
            rows.annotate(document=vector)
            .filter(document=tsquery)
            .annotate(rank=SearchRank(vector, tsquery), headline=headline)
            .order_by("-rank", "-pk")
            .values_list("pk", "headline")[:limit]
        )
    return hits[:limit]


def timed(function, *, repeat: int, **kwargs) -> dict:
    function(**kwargs)  # warm: plans and pages cached, as a server's steady state
    times, found = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        found = len(function(**kwargs))
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, max(0, round(0.95 * len(times)) - 1))]
    return {"ms_p50": statistics.median(times), "ms_p95": p95, "hits": found, "runs": repeat}


def timed_recall(*, session, repeat: int) -> dict:
    """A turn's recall (what context assembly runs for the user's latest message), timed by
    the database time of its statements."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.stores.recall.ranking import RECALL_MAX_HITS, search_past_chats
    from memory.stores.search import SearchError

    active = session.active_topic()

    def recall():
        return search_past_chats(
            session=session,
            query=RECALL_QUERY,
            limit=RECALL_MAX_HITS,
            exclude_topic_id=active.pk,
            replies=True,
            messages_first=True,
        )

    try:
        recall()  # warm
    except SearchError:
        pass
    times, found, statements, stopped = [], 0, 0, 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            try:
                found = len(recall())
            except SearchError:  # past its statement timeout: no passages
                found, stopped = 0, stopped + 1
        statements = len(captured.captured_queries)
        times.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, max(0, round(0.95 * len(times)) - 1))]
    return {
        "ms_p50": statistics.median(times),
        "ms_p95": p95,
        "hits": found,
        "runs": repeat,
        "statements": statements,
        "stopped": stopped,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=30, help="timed searches per query")
    parser.add_argument("--baseline-repeat", type=int, default=3, help="0 skips the baseline")
    args = parser.parse_args()
    if not reachable(5432):
        print("python -m bench.search needs PostgreSQL on 127.0.0.1:5432", file=sys.stderr)
        return 2

    name = configure()
    started = time.perf_counter()
    rows = []
    try:
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection

        from memory.models import Agent, Message, Organization, Session
        from memory.stores.search import search_memory

        call_command("migrate", verbosity=0)
        organization = Organization.objects.create(name="Bench", slug="bench")
        agent = Agent.objects.create(organization=organization, name="Bench")
        user = get_user_model().objects.create_user(username="searcher")
        organization.members.add(user)
        build_history(user=user, agent=agent, messages=args.messages)
        with connection.cursor() as cursor:  # as autovacuum leaves a server's tables
            cursor.execute("VACUUM ANALYZE")
        built = time.perf_counter() - started
        share = Message.objects.filter(content__contains=f" {COMMON} ").count() / args.messages
        for label, query in QUERIES:
            if args.baseline_repeat:
                with connection.cursor() as cursor:  # the index the baseline had
                    cursor.execute(
                        "CREATE INDEX IF NOT EXISTS bench_message_content_search ON "
                        "memory_message USING gin (to_tsvector('simple', coalesce(content, '')))"
                    )
                result = timed(baseline_search, repeat=args.baseline_repeat, user=user, query=query)
                rows.append({"path": "before", "query": label, "q": query, **result})
            result = timed(search_memory, repeat=args.repeat, user=user, query=query)
            rows.append({"path": "after", "query": label, "q": query, **result})
        newest = Session.objects.filter(user=user).order_by("-pk").first()
        recall = timed_recall(session=newest, repeat=args.repeat)
        rows.append({"path": "recall", "query": "12 words", "q": "(db time)", **recall})
    finally:
        drop_database(name)

    return print_report(rows, args=args, share=share, built=built, started=started)


def print_report(rows: list[dict], *, args, share: float, built: float, started: float) -> int:
    """The table and the last JSON line; 0 when the targets hold."""
    print(
        f"search over {args.messages:,} messages of one user (PostgreSQL; '{COMMON}' in "
        f"{share:.0%} of them; built in {built:.0f} s, "
        f"{time.perf_counter() - started:.0f} s in all)"
    )
    header = ("path", "query", "q", "runs", "hits", "p50 ms", "p95 ms")
    print(f"{header[0]:<7}{header[1]:<13}{header[2]:<18}" + "".join(f"{h:>9}" for h in header[3:]))
    for row in rows:
        cells = [row["runs"], row["hits"], f"{row['ms_p50']:.1f}", f"{row['ms_p95']:.1f}"]
        print(
            f"{row['path']:<7}{row['query']:<13}{row['q']:<18}" + "".join(f"{c:>9}" for c in cells)
        )
    common = next(r for r in rows if r["path"] == "after" and r["q"] == COMMON)
    recall = next(r for r in rows if r["path"] == "recall")
    ok = common["ms_p95"] < TARGET_P95_MS and recall["ms_p95"] < RECALL_TARGET_MS
    ok = ok and not recall["stopped"]
    print(
        f"common-word p95 {common['ms_p95']:.1f} ms; target < {TARGET_P95_MS:.0f} ms. "
        f"A turn's recall of 12 common words: {recall['statements']} statements, database "
        f"time p95 {recall['ms_p95']:.1f} ms ({recall['stopped']} stopped by the timeout); "
        f"target < {RECALL_TARGET_MS:.0f} ms. ok: {ok}"
    )
    print(
        json.dumps(
            {
                "bench": "search",
                "messages": args.messages,
                "target_p95_ms": TARGET_P95_MS,
                "rows": [
                    {
                        k: round(v, 2) if isinstance(v, float) else v
                        for k, v in row.items()
                        if k != "q"
                    }
                    for row in rows
                ],
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
