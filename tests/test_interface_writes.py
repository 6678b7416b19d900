"""Writes from the REST API go through memory.actions and tell the session's sockets: a
rename sends ``session.updated``, a fact set or removed sends ``fact.changed``, after the
commit; the fact keeps the provenance it always had. A stranger gets 404 and nobody hears
anything."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from memory.models import Session
from memory.stores.facts import read_fact, read_facts, set_fact
from tests.test_consumer import TIMEOUT, connected_socket
from tests.test_consumer import scheduled as scheduled  # the socket closing schedules an evaluation


def put(client, url, body):
    return client.put(url, data=json.dumps(body), content_type="application/json")


def patch(client, url, body):
    return client.patch(url, data=json.dumps(body), content_type="application/json")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(params=["bob", "charlie"])
def stranger(request):
    """bob shares alice's organization, charlie shares nothing."""
    return request.getfixturevalue(request.param)


def test_a_rename_through_rest_is_published_after_the_commit(
    alice, session, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = patch(
            logged_in(alice), f"/agents-api/sessions/{session.pk}/", {"title": " Lyon "}
        )
        assert published.events == []  # nothing before the commit

    assert response.status_code == 200 and response.json()["title"] == "Lyon"
    assert len(callbacks) == 1
    assert published.events == [
        {"type": "session.updated", "session_id": session.pk, "title": "Lyon"}
    ]
    assert Session.objects.get(pk=session.pk).title == "Lyon"


def test_setting_and_removing_a_fact_through_rest_is_published_with_provenance_as_before(
    alice, agent, session, published, django_capture_on_commit_callbacks
):
    client = logged_in(alice)
    url = f"/agents-api/sessions/{session.pk}/facts/home city"
    with django_capture_on_commit_callbacks(execute=True):
        response = put(client, url, {"value": "Lyon"})

    assert response.status_code == 200
    assert response.json()["provenance"]["home city"]["actor"] == "user"
    fact = read_fact(user=alice, agent=agent, key="home city")
    assert fact["provenance"]["actor"] == "user" and fact["provenance"]["topic_id"] is None
    assert [change["actor"] for change in fact["history"]] == ["user"]
    assert published.events == [{"type": "fact.changed", "key": "home city", "removed": False}]

    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(url).status_code == 204
    assert read_facts(user=alice, agent=agent) == {}
    assert published.events[-1] == {"type": "fact.changed", "key": "home city", "removed": True}


def test_removing_a_missing_fact_is_still_a_404_and_sends_nothing(
    alice, session, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = logged_in(alice).delete(f"/agents-api/sessions/{session.pk}/facts/nothing")
    assert response.status_code == 404
    assert published.events == []


def test_a_stranger_gets_404_and_no_event_is_sent(
    stranger, alice, agent, session, published, django_capture_on_commit_callbacks
):
    set_fact(user=alice, agent=agent, key="secret", value="alice's", actor="user")
    client = logged_in(stranger)
    base = f"/agents-api/sessions/{session.pk}"
    with django_capture_on_commit_callbacks(execute=True):
        assert patch(client, f"{base}/", {"title": "Mine"}).status_code == 404
        assert put(client, f"{base}/facts/secret", {"value": "bob's"}).status_code == 404
        assert client.delete(f"{base}/facts/secret").status_code == 404
    assert published.events == []
    assert Session.objects.get(pk=session.pk).title == ""
    assert read_facts(user=alice, agent=agent) == {"secret": "alice's"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.redis
async def test_the_owners_open_socket_hears_the_rest_rename_and_fact_changes(alice, session):
    socket = await connected_socket(alice, session.pk)
    client = await database_sync_to_async(logged_in)(alice)
    base = f"/agents-api/sessions/{session.pk}"

    response = await database_sync_to_async(patch)(client, f"{base}/", {"title": "Lyon"})
    assert response.status_code == 200
    assert await socket.receive_json_from(timeout=TIMEOUT) == {
        "type": "session.updated",
        "session_id": session.pk,
        "title": "Lyon",
    }
    response = await database_sync_to_async(put)(client, f"{base}/facts/city", {"value": "Lyon"})
    assert response.status_code == 200
    assert await socket.receive_json_from(timeout=TIMEOUT) == {
        "type": "fact.changed",
        "key": "city",
        "removed": False,
    }
    await socket.disconnect(timeout=1)


def test_the_agents_own_fact_writes_are_published_too(
    alice, session, published, django_capture_on_commit_callbacks
):
    from memory.actions.tools import dispatch_tool_calls
    from memory.llm import ToolCall

    def agent_call(arguments):
        call = ToolCall(id="c1", name="important_info", arguments=json.dumps(arguments))
        with django_capture_on_commit_callbacks(execute=True):
            [message] = dispatch_tool_calls(session=session, tool_calls=[call])
        return json.loads(message.content)

    def facts_heard():
        return [event for event in published.events if event["type"] == "fact.changed"]

    assert agent_call({"operation": "$set", "key": "home city", "value": "Lyon"})["ok"]
    assert facts_heard() == [{"type": "fact.changed", "key": "home city", "removed": False}]

    assert agent_call({"operation": "$unset", "key": "home city"})["removed"] is True
    assert facts_heard()[-1] == {"type": "fact.changed", "key": "home city", "removed": True}
