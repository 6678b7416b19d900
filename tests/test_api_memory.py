"""The REST endpoints of the memory panels: curation, the memory block, facts and notes."""

import json

import pytest

from memory.models import Agent, MemoryDecision, Notes, Session, Topic
from memory.stores.facts import read_facts, set_fact
from tests.memory_builders import add_messages, add_topic


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def as_bob(client, bob):
    client.force_login(bob)
    return client


def put(client, url, body):
    return client.put(url, data=json.dumps(body), content_type="application/json")


# --- a topic's memory state --------------------------------------------------------------


def test_the_user_cycles_a_topic_through_the_three_states_and_each_is_manual(as_alice, session):
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Ledger", summary="On PostgreSQL.")
    add_messages(session, 2)
    url = f"/agents-api/topics/{topic.pk}/memory"

    promoted = put(as_alice, url, {"state": "promoted"})
    assert promoted.status_code == 200
    assert promoted.json()["memory_state"] == "promoted"
    assert promoted.json()["keep_in_memory_manually_set"] is True

    deprecated = as_alice.patch(url, data={"state": "deprecated"}, content_type="application/json")
    assert deprecated.json()["memory_state"] == "deprecated"
    assert deprecated.json()["deprecated_manually_set"] is True

    cleared = put(as_alice, url, {"state": "none"})
    assert cleared.json()["memory_state"] == "none"
    topic.refresh_from_db()
    assert (topic.keep_in_memory, topic.deprecated) == (False, False)
    assert topic.keep_in_memory_manually_set and topic.deprecated_manually_set
    decisions = MemoryDecision.objects.filter(topic=topic).order_by("pk")
    assert [(d.actor, d.from_state, d.to_state) for d in decisions] == [
        ("user", "none", "promoted"),
        ("user", "promoted", "deprecated"),
        ("user", "deprecated", "none"),
    ]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"state": "teal"}, "state", "none, promoted, deprecated; got 'teal'"),
        ({"state": None}, "state", "none, promoted, deprecated"),
        ({}, "state", "none, promoted, deprecated"),
        (["promoted"], "non_field_errors", "Expected a dictionary"),
    ],
)
def test_a_bad_memory_state_is_a_400_that_says_what_is_wrong(as_alice, session, body, field, says):
    topic = session.active_topic()
    response = put(as_alice, f"/agents-api/topics/{topic.pk}/memory", body)
    assert response.status_code == 400
    assert says in response.json()["errors"][field][0]
    topic.refresh_from_db()
    assert topic.memory_state == "none" and not topic.keep_in_memory_manually_set


def test_a_stranger_cannot_change_or_see_a_topics_memory(as_bob, session):
    topic = session.active_topic()
    response = put(as_bob, f"/agents-api/topics/{topic.pk}/memory", {"state": "promoted"})
    assert response.status_code == 404
    topic.refresh_from_db()
    assert topic.memory_state == "none"


def test_the_memory_api_needs_a_login(client, session):
    topic = session.active_topic()
    assert put(
        client, f"/agents-api/topics/{topic.pk}/memory", {"state": "promoted"}
    ).status_code in (
        401,
        403,
    )
    assert client.get(f"/agents-api/sessions/{session.pk}/facts").status_code in (401, 403)


# --- the memory block --------------------------------------------------------------------


def test_the_memory_block_lists_promoted_summaries_and_deprecated_titles(as_alice, alice, agent):
    earlier = Session.objects.start(user=alice, agent=agent)
    add_topic(earlier, title="Trip", summary="Lisbon in May; trains only.", keep=True)
    add_topic(earlier, title="Old stack", summary="MySQL (reversed).", deprecated=True)
    add_topic(earlier, title="Chit-chat", summary="Weather.")
    current = Session.objects.start(user=alice, agent=agent)

    data = as_alice.get(f"/agents-api/sessions/{current.pk}/memory").json()

    assert [(e["title"], e["summary"]) for e in data["entries"]] == [
        ("Trip", "Lisbon in May; trains only."),
        ("Old stack", ""),
    ]
    assert data["deprecated"] == ["Old stack"]
    assert data["budget"] == agent.memory_token_budget
    assert data["used"] == sum(e["tokens"] for e in data["entries"]) > 0
    assert "[DEPRECATED] Old stack" in data["text"]
    assert "MySQL" not in data["text"]
    assert data["dropped"] == []


def test_the_memory_block_shows_this_sessions_topics_only_in_the_scope_view(as_alice, session):
    add_topic(session, title="Decided here", summary="Use PostgreSQL.", keep=True)

    data = as_alice.get(f"/agents-api/sessions/{session.pk}/memory").json()

    assert data["entries"] == []  # this session sees its own topics as earlier topics
    assert [e["title"] for e in data["scope"]["entries"]] == ["Decided here"]
    assert data["scope"]["entries"][0]["session_id"] == session.pk


def test_the_memory_block_reports_what_the_budget_dropped_oldest_first(as_alice, alice, agent):
    Agent.objects.filter(pk=agent.pk).update(memory_token_budget=30)
    earlier = Session.objects.start(user=alice, agent=agent)
    for n in range(4):
        add_topic(earlier, title=f"Topic {n}", summary="x" * 60, keep=True, age_days=4 - n)
    current = Session.objects.start(user=alice, agent=agent)

    data = as_alice.get(f"/agents-api/sessions/{current.pk}/memory").json()

    assert data["budget"] == 30
    assert data["used"] <= 30
    assert [e["title"] for e in data["dropped"]] == ["Topic 0", "Topic 1", "Topic 2"]
    assert [e["title"] for e in data["entries"]] == ["Topic 3"]


def test_a_stranger_gets_404_for_the_memory_block(as_bob, session):
    assert as_bob.get(f"/agents-api/sessions/{session.pk}/memory").status_code == 404


# --- facts -------------------------------------------------------------------------------


def test_facts_are_created_changed_and_deleted(as_alice, session, alice, agent):
    base = f"/agents-api/sessions/{session.pk}/facts"
    assert as_alice.get(base).json() == {"facts": {}, "provenance": {}}

    created = put(as_alice, f"{base}/favourite colour", {"value": "teal"})
    assert created.status_code == 200
    assert created.json()["facts"] == {"favourite colour": "teal"}
    assert created.json()["provenance"]["favourite colour"]["actor"] == "user"

    changed = put(as_alice, f"{base}/favourite colour", {"value": "red"})
    assert changed.json()["facts"]["favourite colour"] == "red"
    put(as_alice, f"{base}/deploy", {"value": {"region": "eu", "replicas": 2}})
    assert as_alice.get(base).json()["facts"] == {
        "favourite colour": "red",
        "deploy": {"region": "eu", "replicas": 2},
    }

    deleted = as_alice.delete(f"{base}/favourite colour")
    assert deleted.status_code == 204
    assert read_facts(user=alice, agent=agent) == {"deploy": {"region": "eu", "replicas": 2}}


def test_a_key_with_a_slash_works(as_alice, session, alice, agent):
    response = put(as_alice, f"/agents-api/sessions/{session.pk}/facts/ci%2Fcd", {"value": "on"})
    assert response.status_code == 200
    assert read_facts(user=alice, agent=agent) == {"ci/cd": "on"}


def test_deleting_a_missing_fact_is_a_404_that_says_so(as_alice, session):
    response = as_alice.delete(f"/agents-api/sessions/{session.pk}/facts/nothing")
    assert response.status_code == 404
    assert "nothing" in response.json()["detail"]


@pytest.mark.parametrize(
    ("key", "body", "field"),
    [
        ("colour", {}, "value"),
        ("colour", {"value": "   "}, "value"),
        ("colour", {"value": None}, "value"),
        ("colour", {"value": "x" * 3000}, "value"),
        ("k" * 201, {"value": "v"}, "key"),
        ("%20%20", {"value": "v"}, "key"),
    ],
)
def test_bad_fact_input_is_a_400_and_nothing_is_stored(
    as_alice, session, alice, agent, key, body, field
):
    response = put(as_alice, f"/agents-api/sessions/{session.pk}/facts/{key}", body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert read_facts(user=alice, agent=agent) == {}


def test_a_stranger_can_neither_read_nor_change_facts(as_bob, session, alice, agent):
    set_fact(user=alice, agent=agent, key="secret", value="alice's", actor="user")
    base = f"/agents-api/sessions/{session.pk}/facts"
    assert as_bob.get(base).status_code == 404
    assert put(as_bob, f"{base}/secret", {"value": "bob's"}).status_code == 404
    assert as_bob.delete(f"{base}/secret").status_code == 404
    assert read_facts(user=alice, agent=agent) == {"secret": "alice's"}


def test_facts_belong_to_the_user_not_to_everyone_of_the_agent(client, alice, bob, agent):
    set_fact(user=alice, agent=agent, key="name", value="Alice", actor="user")
    bobs = Session.objects.start(user=bob, agent=agent)
    client.force_login(bob)
    assert client.get(f"/agents-api/sessions/{bobs.pk}/facts").json()["facts"] == {}


# --- notes -------------------------------------------------------------------------------


def test_notes_of_the_active_topic_and_of_a_closed_one(as_alice, session):
    active = session.active_topic()
    Notes.objects.create(topic=active, content="- chose **PostgreSQL**")
    closed = add_topic(session, title="Earlier")
    Notes.objects.create(topic=closed, content="old scratch", archived=True)

    assert as_alice.get(f"/agents-api/topics/{active.pk}/notes").json() == {
        "topic_id": active.pk,
        "content": "- chose **PostgreSQL**",
        "content_html": "<ul>\n<li>chose <strong>PostgreSQL</strong></li>\n</ul>\n",
        "archived": False,
    }
    earlier = as_alice.get(f"/agents-api/topics/{closed.pk}/notes").json()
    assert (earlier["content"], earlier["archived"]) == ("old scratch", True)


def test_a_topic_without_notes_has_empty_notes(as_alice, session):
    data = as_alice.get(f"/agents-api/topics/{session.active_topic().pk}/notes").json()
    assert data["content"] == "" and data["archived"] is False


def test_a_stranger_gets_404_for_notes(as_bob, session):
    Notes.objects.create(topic=session.active_topic(), content="private")
    response = as_bob.get(f"/agents-api/topics/{session.active_topic().pk}/notes")
    assert response.status_code == 404
