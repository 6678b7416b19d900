"""Search over the caller's own memory, on the database this run uses (PostgreSQL when it
answers) and, through a second pytest process, on the embedded SQLite default."""

import os
from pathlib import Path

import pytest
from django.conf import settings

from chat.api.search import hit_url
from memory.models import Message, Session
from memory.stores.facts import set_fact
from memory.stores.search import SearchError, search_memory
from tests.embedded import rerun_on_the_embedded_default
from tests.memory_builders import add_message, add_tool_round, add_topic

ROOT = Path(__file__).resolve().parent.parent


def kinds_and_titles(hits):
    return [(hit.kind, hit.title) for hit in hits]


@pytest.fixture
def decided(session, alice, agent):
    """Alice decided on PostgreSQL, in a topic of an earlier session and in facts."""
    earlier = Session.objects.start(user=alice, agent=agent)
    topic = add_topic(
        earlier,
        title="Database choice",
        summary="DB choice: PostgreSQL over MySQL (JSON columns, full-text search).",
        keep=True,
    )
    add_message(earlier, Message.Role.USER, "Which databases should we compare?")
    Message.objects.filter(session=earlier).update(topic=topic)
    add_message(session, Message.Role.USER, "Remind me what we decided about the database")
    set_fact(user=alice, agent=agent, key="primary database", value="PostgreSQL 16", actor="user")
    return topic


def test_it_finds_facts_topics_and_messages_of_the_owner(decided, alice, session):
    hits = search_memory(user=alice, query="database")
    assert kinds_and_titles(hits)[0] == ("fact", "primary database")
    assert ("topic", "Database choice") in kinds_and_titles(hits)
    messages = [hit for hit in hits if hit.kind == "message"]
    assert {hit.session_id for hit in messages} == {decided.session_id, session.pk}
    # A word matches the longer words it starts: "database" finds "databases".
    assert any("databases" in hit.snippet for hit in messages)
    topic_hit = next(hit for hit in hits if hit.kind == "topic")
    assert (topic_hit.session_id, topic_hit.topic_id) == (decided.session_id, decided.pk)
    assert hit_url(topic_hit) == f"/sessions/{decided.session_id}/#topic-{decided.pk}"
    assert "PostgreSQL" in topic_hit.snippet


def test_every_word_must_match(decided, alice):
    assert search_memory(user=alice, query="database mysql")[0].kind == "topic"
    assert search_memory(user=alice, query="database kubernetes") == []


def test_it_never_returns_a_strangers_matching_data(decided, alice, bob, agent):
    strangers = Session.objects.start(user=bob, agent=agent)
    add_topic(strangers, title="Bob's database", summary="Bob's database notes", keep=True)
    add_message(strangers, Message.Role.USER, "bob talks about the database too")
    set_fact(user=bob, agent=agent, key="bob database", value="Oracle", actor="user")
    hits = search_memory(user=alice, query="database")
    assert hits and all(hit.session_id != strangers.pk for hit in hits)
    assert not [hit for hit in hits if "bob" in (hit.title + hit.snippet).casefold()]
    assert all(
        hit.session_id != decided.session_id for hit in search_memory(user=bob, query="postgresql")
    )


def test_a_russian_query_matches_russian_text(alice, session):
    add_message(session, Message.Role.USER, "Мы выбрали PostgreSQL для базы данных проекта.")
    add_message(session, Message.Role.ASSISTANT, "Хорошо, запишу решение о базе данных.")
    hits = search_memory(user=alice, query="Базы")
    assert [hit.snippet for hit in hits] and "базы" in hits[0].snippet
    assert len(search_memory(user=alice, query="баз данных")) == 2


def test_tool_traffic_is_not_searched_but_the_replies_are(alice, session):
    add_tool_round(session, ["important_info"], tag="x")
    add_message(session, Message.Role.ASSISTANT, "I stored your important database setting.")
    hits = search_memory(user=alice, query="important")
    assert [hit.kind for hit in hits] == ["message"]


def test_edits_and_deletes_reach_the_index(alice, session, agent):
    message = add_message(session, Message.Role.USER, "we picked redis for caching")
    assert search_memory(user=alice, query="redis")
    Message.objects.filter(pk=message.pk).update(content="we picked memcached for caching")
    assert search_memory(user=alice, query="redis") == []
    assert search_memory(user=alice, query="memcached")
    Session.objects.filter(pk=session.pk).delete()
    assert search_memory(user=alice, query="memcached") == []


@pytest.mark.parametrize("query", ["", "   ", "?!…", "x" * 201, None, 5])
def test_a_query_without_words_is_refused_with_a_reason(alice, query):
    with pytest.raises(SearchError):
        search_memory(user=alice, query=query)


# --- the REST endpoint and the page -----------------------------------------------------------


def test_the_search_endpoint_answers_the_owner(client, alice, decided):
    client.force_login(alice)
    body = client.get("/agents-api/search", {"q": "database"}).json()
    assert body["query"] == "database"
    assert body["results"][0] == {
        "kind": "fact",
        "title": "primary database",
        "snippet": "PostgreSQL 16",
        "session_id": None,
        "topic_id": None,
        "url": "",
    }
    assert (
        len(client.get("/agents-api/search", {"q": "database", "limit": "1"}).json()["results"])
        == 1
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": "!!"}, "q"),
        ({"q": "db", "limit": "0"}, "limit"),
        ({"q": "db", "limit": "x"}, "limit"),
    ],
)
def test_bad_search_input_is_a_400_that_names_the_field(client, alice, params, field):
    client.force_login(alice)
    response = client.get("/agents-api/search", params)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_search_needs_a_login(client, decided):
    assert client.get("/agents-api/search", {"q": "database"}).status_code in (401, 403)
    assert client.get("/search/", {"q": "database"}).status_code == 302


def test_the_search_page_marks_words_and_escapes_content(client, alice, session):
    add_message(session, Message.Role.USER, "<script>alert(1)</script> the database plan")
    client.force_login(alice)
    page = client.get("/search/", {"q": "database"}).content.decode()
    assert "<mark>database</mark>" in page
    # PostgreSQL's snippet drops the tag, SQLite's keeps it as text: escaped either way.
    assert "<script>alert(1)" not in page and "alert(1)" in page
    assert f'href="/sessions/{session.pk}/#topic-{session.active_topic().pk}"' in page
    assert "Nothing in your sessions" in client.get("/search/", {"q": "zebra"}).content.decode()


# --- the embedded default ---------------------------------------------------------------------


@pytest.mark.postgres
def test_search_also_works_on_the_embedded_sqlite_default():
    """The tests above, again, in a pytest process that runs on SQLite (FTS5)."""
    if os.environ.get("DRIFTLESS_TEST_EMBEDDED"):
        pytest.skip("already the embedded run")
    rerun_on_the_embedded_default(__file__)
    assert settings.DATABASES["default"]["ENGINE"].endswith("postgresql")  # this run was not


# --- a search bounded in time and work (issue 20) ---------------------------------------


@pytest.mark.postgres
def test_a_search_that_runs_too_long_is_stopped_and_refused(client, alice, decided, monkeypatch):
    from django.db import connection

    from memory.stores import search

    def stuck(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        return []

    monkeypatch.setattr(search, "STATEMENT_TIMEOUT_MS", 100)
    monkeypatch.setattr(search._postgres, "messages", staticmethod(stuck))
    with pytest.raises(search.SearchTooSlow):
        search_memory(user=alice, query="database")
    client.force_login(alice)
    response = client.get("/agents-api/search", {"q": "database"})
    assert (response.status_code, response.json()["code"]) == (400, "search_too_slow")
    page = client.get("/search/", {"q": "database"})
    assert page.status_code == 200 and "took too long" in page.content.decode()
    # The connection goes on working, without the limit.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.postgres
def test_only_the_newest_matches_are_ranked_and_only_the_page_gets_snippets(
    alice, session, monkeypatch
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.stores import search

    for n in range(12):
        add_message(session, Message.Role.USER, f"note {n} about the database")
    monkeypatch.setattr(search, "RANKED_CANDIDATES", 5)
    with CaptureQueriesContext(connection) as queries:
        hits = search_memory(user=alice, query="database", limit=3)
    assert [hit.snippet for hit in hits if hit.kind == "message"] == [
        f"note {n} about the database" for n in (11, 10, 9)
    ]
    headlines = [q["sql"] for q in queries if "ts_headline" in q["sql"]]
    assert headlines and all("ts_rank" not in sql for sql in headlines)
    assert any('"search_vector"' in q["sql"] for q in queries)


@pytest.mark.postgres
def test_a_rare_word_older_than_the_recent_window_is_found_through_the_index(
    alice, session, monkeypatch
):
    from memory.stores import search

    add_message(session, Message.Role.USER, "the zanzibar plan, long ago")
    for n in range(10):
        add_message(session, Message.Role.USER, f"unrelated note {n}")
    monkeypatch.setattr(search, "RECENT_WINDOW", 3)
    hits = search_memory(user=alice, query="zanzib")
    assert [hit.snippet for hit in hits] == ["the zanzibar plan, long ago"]
