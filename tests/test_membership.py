"""Membership is checked wherever ownership is: a removed member (or a deactivated user)
is refused on every interface, at once, by the one queryset they all read through
(``Session.objects.owned_by``)."""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from memory.actions.tools import ACCESS_ENDED_ERROR, dispatch_tool_calls
from memory.actions.turn import do_send_message
from memory.llm import ToolCall
from memory.models import Message, Session, SessionUnreachable, Topic
from memory.stores.facts import read_facts, set_fact
from memory.stores.notes import append_notes

pytestmark = pytest.mark.django_db


@pytest.fixture
def scope(session, alice, agent):
    """alice's session with a fact, a note and a message: all she must lose."""
    set_fact(user=alice, agent=agent, key="city", value="Lyon", actor="user")
    topic = session.active_topic()
    append_notes(topic=topic, text="a private note")
    session.append_message(role=Message.Role.USER, content="hello")
    return session, topic


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def rest_reads(session: Session, topic: Topic) -> list[tuple[str, str, dict | None]]:
    s, t = session.pk, topic.pk
    return [
        ("get", f"/agents-api/sessions/{s}/", None),
        ("get", f"/agents-api/sessions/{s}/topics/", None),
        ("get", f"/agents-api/topics/{t}/messages", None),
        ("get", f"/agents-api/sessions/{s}/memory", None),
        ("get", f"/agents-api/sessions/{s}/facts", None),
        ("get", f"/agents-api/topics/{t}/notes", None),
        ("get", f"/agents-api/sessions/{s}/context", None),
        ("post", f"/agents-api/sessions/{s}/messages", {"content": "still here?"}),
        ("post", f"/agents-api/sessions/{s}/topics/", None),
        ("post", f"/agents-api/sessions/{s}/evaluate", None),
        ("put", f"/agents-api/sessions/{s}/facts/city", {"value": "Paris"}),
        ("delete", f"/agents-api/sessions/{s}/facts/city", None),
        ("put", f"/agents-api/topics/{t}/memory", {"state": "promoted"}),
    ]


def test_a_member_reaches_every_endpoint_before_removal(scope, alice, fake_openai):
    session, topic = scope
    client = token_client(alice)
    for method, path, body in rest_reads(session, topic)[:7]:
        assert getattr(client, method)(path, body, format="json").status_code == 200, path


@pytest.mark.parametrize("how", ["removed", "deactivated"])
def test_a_removed_member_is_refused_on_every_rest_endpoint_and_nothing_changes(
    scope, alice, organization, how, fake_openai
):
    session, topic = scope
    client = token_client(alice)
    assert client.get("/agents-api/sessions/").json() != []
    if how == "removed":
        organization.members.remove(alice)
    else:
        alice.is_active = False
        alice.save(update_fields=["is_active"])
    expected = 404 if how == "removed" else 401  # a deactivated user's token is refused
    if how == "removed":
        assert client.get("/agents-api/sessions/").json() == []
        assert client.get("/agents-api/agents/").json() == []
    for method, path, body in rest_reads(session, topic):
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == expected, (method, path, response.status_code)
    assert session.messages.count() == 1
    assert session.topics.count() == 1
    assert read_facts(user=alice, agent=session.agent) == {"city": "Lyon"}
    assert fake_openai.requests == []


def test_a_removed_member_is_refused_the_session_page_and_the_session_list(
    scope, alice, organization, client
):
    session, _ = scope
    client.force_login(alice)
    assert client.get(f"/sessions/{session.pk}/").status_code == 200
    organization.members.remove(alice)
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert f"/sessions/{session.pk}/" not in client.get("/").content.decode()


def test_rejoining_the_organization_restores_access(scope, alice, organization):
    session, _ = scope
    client = token_client(alice)
    organization.members.remove(alice)
    assert client.get(f"/agents-api/sessions/{session.pk}/").status_code == 404
    organization.members.add(alice)
    assert client.get(f"/agents-api/sessions/{session.pk}/").status_code == 200


def test_an_agent_tool_call_after_removal_is_refused_and_changes_nothing(
    scope, alice, organization, agent
):
    session, topic = scope
    organization.members.remove(alice)
    calls = [
        ToolCall(id="c1", name="important_info", arguments=json.dumps({"operation": "read"})),
        ToolCall(
            id="c2",
            name="important_info",
            arguments=json.dumps({"operation": "$set", "key": "city", "value": "Paris"}),
        ),
        ToolCall(id="c3", name="notes", arguments=json.dumps({"operation": "read"})),
    ]
    messages = dispatch_tool_calls(session=session, tool_calls=calls)
    results = [json.loads(message.content) for message in messages]
    assert results == [{"error": ACCESS_ENDED_ERROR}] * 3
    assert read_facts(user=alice, agent=agent) == {"city": "Lyon"}


def test_an_agent_tool_call_of_a_member_still_works(scope, alice):
    session, _ = scope
    call = ToolCall(id="c1", name="important_info", arguments=json.dumps({"operation": "read"}))
    [message] = dispatch_tool_calls(session=session, tool_calls=[call])
    assert json.loads(message.content) == {"facts": {"city": "Lyon"}}


def test_owned_by_is_the_one_check_for_sessions_and_topics(scope, alice, bob, organization):
    session, topic = scope
    assert list(Session.objects.owned_by(alice)) == [session]
    assert list(Topic.objects.owned_by(alice)) == [topic]
    assert not Session.objects.owned_by(bob).exists()  # same organization, not his
    organization.members.remove(alice)
    assert not Session.objects.owned_by(alice).exists()
    assert not Topic.objects.owned_by(alice).exists()


def test_a_removed_member_finds_nothing_and_exports_nothing(scope, alice, organization, agent):
    session, _ = scope
    client = token_client(alice)
    found = client.get("/agents-api/search", {"q": "hello"}).json()["results"]
    assert found, "a member finds their own message"
    assert client.get("/agents-api/memory/export", {"agent": agent.pk}).status_code == 200
    organization.members.remove(alice)
    assert client.get("/agents-api/search", {"q": "hello"}).json()["results"] == []
    assert client.get("/agents-api/search", {"q": "Lyon"}).json()["results"] == []
    assert client.get("/agents-api/memory/export", {"agent": agent.pk}).status_code == 404


def test_a_turn_stops_asking_the_model_once_its_user_lost_access(
    scope, alice, organization, agent, fake_openai
):
    """Removed after the interface's check, before the answer came: nothing of the answer
    is stored (not even its tool call), no tool runs and the model is not asked again."""
    session, _ = scope
    fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "city", "value": "Paris"})]
    )
    fake_openai.reply_text("never asked")
    organization.members.remove(alice)

    result = do_send_message(session=session, content="remember Paris")

    assert len(fake_openai.requests) == 1
    assert result.activity == []
    assert list(session.messages.values_list("role", flat=True))[-2:] == ["user", "error"]
    assert result.reply is None and "no longer have access" in result.error.content
    assert read_facts(user=alice, agent=agent) == {"city": "Lyon"}


def lose_access(how: str, alice, organization) -> None:
    if how == "removed":
        organization.members.remove(alice)
    else:
        alice.is_active = False
        alice.save(update_fields=["is_active"])


@pytest.mark.parametrize("how", ["removed", "deactivated"])
def test_a_reply_is_not_stored_once_its_user_lost_access(
    scope, alice, organization, fake_openai, how
):
    """Removed or deactivated while the model answered: the statement that would store the
    reply finds the session out of reach, so only the error record stays."""
    session, _ = scope
    fake_openai.reply_text("a reply nobody may read")
    lose_access(how, alice, organization)

    result = do_send_message(session=session, content="hello again")

    assert result.reply is None and "no longer have access" in result.error.content
    assert list(session.messages.values_list("role", flat=True))[-2:] == ["user", "error"]
    assert not session.messages.filter(content="a reply nobody may read").exists()


@pytest.mark.parametrize("how", ["removed", "deactivated"])
def test_a_message_stored_for_a_reachable_session_only_is_refused_once_out_of_reach(
    scope, alice, organization, how
):
    session, _ = scope
    kept = session.append_message(role=Message.Role.ASSISTANT, content="in", reachable=True)
    assert kept.seq == session.message_count
    lose_access(how, alice, organization)

    with pytest.raises(SessionUnreachable):
        session.append_message(role=Message.Role.ASSISTANT, content="out", reachable=True)

    assert session.messages.count() == kept.seq == session.message_count
    assert session.append_message(role=Message.Role.ERROR, content="still recorded").pk
