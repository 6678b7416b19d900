"""The REST endpoints of chat/api/sessions.py, each with the stranger's 404."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.protocol import MAX_MESSAGE_CHARS
from memory.llm import Usage
from memory.models import Agent, Message, Organization, Session, Topic
from memory.stores.leases import session_lock
from memory.stores.messages import store_message


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def other_agent(db):
    elsewhere = Organization.objects.create(name="Elsewhere", slug="elsewhere")
    return Agent.objects.create(organization=elsewhere, name="Other", soul="You are Other.")


@pytest.fixture(params=["bob", "charlie"])
def stranger(request):
    """bob (same organization) and charlie (none): neither may see alice's rows."""
    return request.getfixturevalue(request.param)


# --- agents -------------------------------------------------------------------------------


def test_the_agent_list_shows_the_agents_of_the_callers_organizations(alice, agent, other_agent):
    response = client_for(alice).get("/agents-api/agents/")
    assert response.status_code == 200
    assert [(a["id"], a["name"], a["organization"]["slug"]) for a in response.json()] == [
        (agent.pk, "Drift", "acme")
    ]


def test_a_user_without_an_organization_sees_no_agents(charlie, agent):
    response = client_for(charlie).get("/agents-api/agents/")
    assert response.status_code == 200 and response.json() == []


def test_anonymous_callers_are_refused(session):
    for path in (
        "/agents-api/agents/",
        "/agents-api/sessions/",
        f"/agents-api/sessions/{session.pk}/",
    ):
        assert client_for(None).get(path).status_code in (401, 403)


def test_token_authentication_works(alice, session):
    token = Token.objects.create(user=alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.get("/agents-api/sessions/")
    assert response.status_code == 200
    assert [s["id"] for s in response.json()] == [session.pk]


# --- sessions -----------------------------------------------------------------------------


def test_starting_a_session_gives_it_an_active_topic(alice, agent):
    response = client_for(alice).post(
        "/agents-api/sessions/", {"agent": agent.pk, "title": "Trip"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    session = Session.objects.get(pk=body["id"])
    assert session.user == alice and session.agent == agent and body["title"] == "Trip"
    assert body["active_topic_id"] == session.active_topic().pk
    assert body["usage"] == {
        "prompt_tokens": 0,
        "cached_tokens": 0,
        "completion_tokens": 0,
        "cache_hit_ratio": None,
    }


def test_a_session_cannot_be_started_with_an_agent_of_another_organization(
    alice, charlie, agent, other_agent
):
    refused = client_for(alice).post(
        "/agents-api/sessions/", {"agent": other_agent.pk}, format="json"
    )
    assert refused.status_code == 400 and refused.json()["field"] == "agent"
    refused = client_for(charlie).post("/agents-api/sessions/", {"agent": agent.pk}, format="json")
    assert refused.status_code == 400
    assert client_for(alice).post("/agents-api/sessions/", {}, format="json").status_code == 400
    assert not Session.objects.exists()


def test_the_session_list_holds_only_the_callers_sessions(alice, bob, agent, session):
    Session.objects.start(user=bob, agent=agent)
    response = client_for(alice).get("/agents-api/sessions/")
    assert response.status_code == 200
    assert [s["id"] for s in response.json()] == [session.pk]


def test_the_session_detail_shows_the_usage_summed_with_the_cache_hit_ratio(alice, session):
    store_message(session=session, role="user", content="Hi")
    store_message(
        session=session,
        role="assistant",
        content="Hello",
        prompt_tokens=400,
        cached_tokens=300,
        completion_tokens=10,
    )
    response = client_for(alice).get(f"/agents-api/sessions/{session.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["message_count"] == 2 and body["agent_name"] == "Drift"
    assert body["usage"] == {
        "prompt_tokens": 400,
        "cached_tokens": 300,
        "completion_tokens": 10,
        "cache_hit_ratio": 0.75,
    }


def test_a_stranger_gets_404_for_the_session(stranger, session):
    assert client_for(stranger).get(f"/agents-api/sessions/{session.pk}/").status_code == 404
    assert client_for(stranger).get("/agents-api/sessions/").json() == []


# --- a turn over REST ---------------------------------------------------------------------


def test_sending_a_message_returns_the_whole_turn(alice, session, fake_openai):
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "tea", "value": "green"})]
    )
    fake_openai.reply_text(
        "Noted: green tea.", usage=Usage(prompt_tokens=90, cached_tokens=64, completion_tokens=4)
    )

    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages",
        {"content": "I like green tea"},
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    assert body["user_message"]["content"] == "I like green tea"
    assert body["reply"]["content"] == "Noted: green tea."
    assert body["reply"]["cached_tokens"] == 64
    assert [m["role"] for m in body["activity"]] == ["assistant", "tool"]
    assert body["activity"][0]["tool_calls"][0]["function"]["name"] == "important_info"
    assert body["usage"]["cached_tokens"] == 64


def test_a_model_failure_answers_502_and_keeps_the_message(alice, session, fake_openai):
    fake_openai.fail(503, "upstream exploded")

    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Hello?"}, format="json"
    )

    assert response.status_code == 502
    body = response.json()
    assert "HTTP 503" in body["error"] and body["retryable"] is True
    assert "upstream exploded" not in body["error"]  # the provider's text: in the log only
    assert body["user_message"]["content"] == "Hello?"
    assert list(session.messages.values_list("role", flat=True)) == ["user", "error"]


@pytest.mark.parametrize(
    "content, expected",
    [("", "empty"), ("   \n", "empty"), ("x" * (MAX_MESSAGE_CHARS + 1), "limit is 16000")],
)
def test_an_empty_or_oversized_message_is_refused(alice, session, content, expected):
    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": content}, format="json"
    )
    assert response.status_code == 400
    assert expected in response.json()["errors"]["content"][0]
    assert not session.messages.exists()


def test_a_message_at_the_limit_is_accepted(alice, session):
    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages",
        {"content": "x" * MAX_MESSAGE_CHARS},
        format="json",
    )
    assert response.status_code == 201


def test_a_message_during_a_running_turn_answers_409(alice, session, fake_openai):
    with session_lock(session.pk):
        response = client_for(alice).post(
            f"/agents-api/sessions/{session.pk}/messages", {"content": "Hi"}, format="json"
        )
    assert response.status_code == 409
    assert response.json()["detail"] == "a reply is still being generated"
    assert not session.messages.exists()


def test_a_stranger_cannot_send_a_message(stranger, session, fake_openai):
    response = client_for(stranger).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Hi"}, format="json"
    )
    assert response.status_code == 404
    assert not Message.objects.exists() and fake_openai.requests == []


# --- topics -------------------------------------------------------------------------------


def test_the_topic_list_shows_the_sessions_topics_in_order(alice, session):
    first = session.active_topic()
    response = client_for(alice).get(f"/agents-api/sessions/{session.pk}/topics/")
    assert response.status_code == 200
    assert [(t["id"], t["is_active"], t["memory_state"]) for t in response.json()] == [
        (first.pk, True, "none")
    ]


def test_posting_a_topic_closes_the_active_one_and_starts_another(alice, session):
    first = session.active_topic()
    store_message(session=session, role="user", content="Let's plan the trip")

    response = client_for(alice).post(f"/agents-api/sessions/{session.pk}/topics/")

    assert response.status_code == 201
    new = Topic.objects.get(pk=response.json()["id"])
    assert new.is_active and new.origin == "user" and new.session == session
    first.refresh_from_db()
    assert not first.is_active and first.closed_at is not None
    listed = client_for(alice).get(f"/agents-api/sessions/{session.pk}/topics/").json()
    assert [t["id"] for t in listed] == [first.pk, new.pk]


def test_a_new_topic_during_a_running_turn_answers_409(alice, session):
    with session_lock(session.pk):
        response = client_for(alice).post(f"/agents-api/sessions/{session.pk}/topics/")
    assert response.status_code == 409
    assert session.topics.count() == 1


def test_a_stranger_gets_404_for_the_topics(stranger, session):
    client = client_for(stranger)
    assert client.get(f"/agents-api/sessions/{session.pk}/topics/").status_code == 404
    assert client.post(f"/agents-api/sessions/{session.pk}/topics/").status_code == 404
    assert session.topics.count() == 1


def test_a_topics_messages_are_listed_in_order_with_tool_activity(alice, session):
    topic = session.active_topic()
    store_message(session=session, role="user", content="Remember tea")
    store_message(
        session=session,
        role="assistant",
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": "{}"}}
        ],
    )
    store_message(session=session, role="tool", tool_call_id="c1", tool_name="notes", content="{}")

    response = client_for(alice).get(f"/agents-api/topics/{topic.pk}/messages")

    assert response.status_code == 200
    body = response.json()
    assert [(m["seq"], m["role"]) for m in body] == [(1, "user"), (2, "assistant"), (3, "tool")]
    assert body[1]["tool_calls"][0]["id"] == "c1" and body[2]["tool_call_id"] == "c1"


def test_a_stranger_gets_404_for_a_topics_messages(stranger, session):
    topic = session.active_topic()
    assert client_for(stranger).get(f"/agents-api/topics/{topic.pk}/messages").status_code == 404


# --- pages of messages and renaming ---------------------------------------------------------


def test_a_topics_messages_come_in_pages_with_a_before_cursor(alice, session):
    topic = session.active_topic()
    for n in range(1, 8):
        session.append_message(role="user", content=f"m{n}")
    client = client_for(alice)
    url = f"/agents-api/topics/{topic.pk}/messages"

    latest = client.get(url, {"limit": 3}).json()
    assert [m["content"] for m in latest] == ["m5", "m6", "m7"]
    earlier = client.get(url, {"limit": 3, "before": latest[0]["seq"]}).json()
    assert [m["content"] for m in earlier] == ["m2", "m3", "m4"]
    first = client.get(url, {"limit": 3, "before": earlier[0]["seq"]}).json()
    assert [m["content"] for m in first] == ["m1"]
    assert client.get(url, {"before": 1}).json() == []
    # Without parameters: the latest page, as the chat page opens it.
    assert len(client.get(url).json()) == 7


@pytest.mark.parametrize(
    "query", [{"before": "abc"}, {"before": 0}, {"limit": 0}, {"limit": 10_000}, {"limit": "1.5"}]
)
def test_a_bad_cursor_is_a_400_that_names_the_parameter(alice, session, query):
    topic = session.active_topic()
    response = client_for(alice).get(f"/agents-api/topics/{topic.pk}/messages", query)
    assert response.status_code == 400
    assert set(response.json()["errors"]) == set(query)


def test_the_cursor_is_documented_in_the_openapi_schema(alice):
    schema = client_for(alice).get("/agents-api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/agents-api/topics/{topic_id}/messages"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"before", "limit", "topic_id"}
    assert "patch" in schema["paths"]["/agents-api/sessions/{session_id}/"]


def test_renaming_a_session(alice, session):
    client = client_for(alice)
    url = f"/agents-api/sessions/{session.pk}/"

    response = client.patch(url, {"title": "  Trip to Lisbon  "}, format="json")

    assert response.status_code == 200
    assert response.json()["title"] == "Trip to Lisbon"
    session.refresh_from_db()
    assert session.title == "Trip to Lisbon"
    assert client.patch(url, {"title": ""}, format="json").json()["title"] == ""


@pytest.mark.parametrize(
    "body", [{}, {"title": None}, {"title": 5}, {"title": "x" * 201}, {"title": "a\x00b"}]
)
def test_a_bad_title_is_refused_and_the_old_one_kept(alice, session, body):
    Session.objects.filter(pk=session.pk).update(title="Kept")
    response = client_for(alice).patch(f"/agents-api/sessions/{session.pk}/", body, format="json")
    assert response.status_code == 400
    session.refresh_from_db()
    assert session.title == "Kept"


def test_a_stranger_cannot_rename_or_page_through_a_session(stranger, session):
    Session.objects.filter(pk=session.pk).update(title="Mine")
    client = client_for(stranger)
    response = client.patch(f"/agents-api/sessions/{session.pk}/", {"title": "x"}, format="json")
    assert response.status_code == 404
    topic = session.active_topic()
    url = f"/agents-api/topics/{topic.pk}/messages"
    assert client.get(url, {"before": 5}).status_code == 404
    session.refresh_from_db()
    assert session.title == "Mine"
