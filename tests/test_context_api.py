"""GET /agents-api/sessions/<id>/context: the context inspector, for the owner only."""

import pytest
from rest_framework.test import APIClient

from memory.models import Agent, Message, Session
from memory.stores.facts import set_fact
from memory.stores.notes import append_notes
from tests.memory_builders import add_messages, add_topic


def url(session):
    return f"/agents-api/sessions/{session.pk}/context"


def client_for(user=None):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_the_owner_sees_the_assembled_stack_and_the_cache_figures(session, alice, agent):
    earlier = Session.objects.start(user=alice, agent=agent)
    add_topic(earlier, title="Old", summary="o" * 80, keep=True, age_days=9)
    add_topic(earlier, title="Stack", summary="Django.", keep=True, age_days=1)
    Agent.objects.filter(pk=agent.pk).update(memory_token_budget=10)
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    append_notes(topic=session.active_topic(), text="Decided: Postgres.")
    add_messages(session, 3)
    Message.objects.filter(session=session, role="assistant").update(
        prompt_tokens=1000, cached_tokens=750
    )

    response = client_for(alice).get(url(session))

    assert response.status_code == 200
    data = response.json()
    assert [layer["name"] for layer in data["layers"]] == ["stable", "semi_stable", "volatile"]
    stable = data["layers"][0]
    assert [part["name"] for part in stable["parts"]] == [
        "soul",
        "skills",
        "tools",
        "persistent_memory",
        "durable_facts",
        "drift_result",
    ]
    assert stable["tokens"] == sum(part["tokens"] for part in stable["parts"])
    assert data["dropped"] == ["Old"]
    assert data["dropped_earlier_topics"] == []
    assert data["messages"][0]["role"] == "system"
    assert "Stack: Django." in data["messages"][0]["content"]
    assert "- city (set " in data["messages"][0]["content"]
    assert "> Decided: Postgres." in data["messages"][1]["content"]
    assert data["messages"][2]["content"].startswith("Today's date: ")
    assert [m["content"] for m in data["messages"][3:]] == ["m1", "m2", "m3"]
    assert [t["function"]["name"] for t in data["tools"]] == [
        "notes",
        "important_info",
        "manage_topic_memory",
        "recall",
    ]
    assert data["cache"] == {"prompt_tokens": 1000, "cached_tokens": 750, "hit_rate": 0.75}


def test_a_session_without_usage_has_no_hit_rate(session, alice):
    data = client_for(alice).get(url(session)).json()
    assert data["cache"] == {"prompt_tokens": 0, "cached_tokens": 0, "hit_rate": None}


@pytest.mark.parametrize("stranger", ["bob", "charlie"])
def test_anyone_else_gets_a_404(session, request, stranger):
    user = request.getfixturevalue(stranger)
    response = client_for(user).get(url(session))
    assert response.status_code == 404
    assert "You are Drift." not in response.content.decode()


def test_a_missing_session_is_a_404(session, alice):
    missing = Session(pk=session.pk + 1000)
    assert client_for(alice).get(url(missing)).status_code == 404


def test_an_anonymous_caller_is_refused(session):
    response = client_for().get(url(session))
    assert response.status_code in (401, 403)
    assert "You are Drift." not in response.content.decode()


def test_the_inspector_only_reads(session, alice):
    response = client_for(alice).post(url(session), {})
    assert response.status_code == 405
