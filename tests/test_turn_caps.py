"""Fair sharing: a user (or an organization) at its cap of concurrent turns is refused
with ``busy`` at once, nothing stored, while another user's turn starts at once, over REST
and the socket alike (issue 20)."""

from __future__ import annotations

import threading

import pytest
from channels.db import database_sync_to_async
from django.db import connections
from rest_framework.test import APIClient

from memory.actions import turn as turn_module
from memory.models import Lease, Session
from memory.stores import leases
from memory.stores.leases import TurnCapReached
from tests.test_consumer import connected_socket, receive_until, send

pytestmark = [pytest.mark.django_db(transaction=True)]


def rest_send(user, session_id: int, content: str = "Hello"):
    client = APIClient()
    client.force_authenticate(user)
    return client.post(
        f"/agents-api/sessions/{session_id}/messages", {"content": content}, format="json"
    )


def _hold(prefix: str, owner_id: int, cap: int) -> list[leases.Held]:
    """What ``cap`` slow turns of the owner hold while they stream."""
    return [leases.acquire(f"{prefix}{owner_id}:{n}") for n in range(cap)]


@pytest.mark.redis
async def test_a_user_at_the_cap_gets_busy_while_another_users_turn_starts_at_once(
    alice, bob, agent, settings
):
    settings.TURN_CAP_PER_USER = 2
    alices = await database_sync_to_async(Session.objects.start)(user=alice, agent=agent)
    bobs = await database_sync_to_async(Session.objects.start)(user=bob, agent=agent)
    held = await database_sync_to_async(_hold)(leases.USER_SLOT_PREFIX, alice.pk, 2)
    try:
        refused = await database_sync_to_async(rest_send)(alice, alices.pk)
        socket = await connected_socket(alice, alices.pk)
        try:
            await send(socket, {"type": "message.send", "content": "Hello"})
            (error,) = await receive_until(socket, "error")
        finally:
            await socket.disconnect()
        assert (refused.status_code, refused.json()["code"]) == (429, "busy")
        assert "2 replies" in refused.json()["detail"]
        assert error["code"] == "busy"
        assert await database_sync_to_async(alices.messages.count)() == 0  # nothing stored

        # Bob's turns start at once, over both interfaces.
        answered = await database_sync_to_async(rest_send)(bob, bobs.pk)
        assert answered.status_code == 201, answered.content
        socket = await connected_socket(bob, bobs.pk)
        try:
            await send(socket, {"type": "message.send", "content": "And now?"})
            events = await receive_until(socket, "turn.done")
        finally:
            await socket.disconnect()
        assert "turn.started" in [event["type"] for event in events]
        assert "error" not in [event["type"] for event in events]
    finally:
        for one in held:
            await database_sync_to_async(leases.release)(one)
    # A slot free again: alice's next message is answered.
    assert (await database_sync_to_async(rest_send)(alice, alices.pk)).status_code == 201


def test_an_organization_at_its_cap_gets_busy(alice, session, settings):
    settings.TURN_CAP_PER_ORGANIZATION = 1
    held = _hold(leases.ORGANIZATION_SLOT_PREFIX, session.organization_id, 1)
    try:
        response = rest_send(alice, session.pk)
        assert (response.status_code, response.json()["code"]) == (429, "busy")
        assert "Your organization" in response.json()["detail"]
        assert session.messages.count() == 0
        assert not Lease.objects.filter(name__startswith=leases.USER_SLOT_PREFIX).exists()
    finally:
        leases.release(held[0])


def test_a_running_turn_holds_a_slot_and_frees_it_when_done(alice, agent, settings, monkeypatch):
    """A real turn in flight (its model call held open) counts against the cap."""
    settings.TURN_CAP_PER_USER = 1
    first = Session.objects.start(user=alice, agent=agent)
    second = Session.objects.start(user=alice, agent=agent)
    streaming, finish = threading.Event(), threading.Event()
    real_converse = turn_module._converse

    def slow_converse(**kwargs):
        streaming.set()
        finish.wait(10)
        return real_converse(**kwargs)

    monkeypatch.setattr(turn_module, "_converse", slow_converse)
    results = []

    def first_turn():
        try:
            results.append(rest_send(alice, first.pk))
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_turn)
    thread.start()
    try:
        assert streaming.wait(10)
        with pytest.raises(TurnCapReached):
            turn_module.do_send_message(session=second, content="Me too")
        assert second.messages.count() == 0
    finally:
        finish.set()
        thread.join(10)
    assert results[0].status_code == 201
    assert not Lease.objects.filter(name__startswith=leases.USER_SLOT_PREFIX).exists()
    turn_module.do_send_message(session=second, content="Now?")


def test_the_context_inspector_answers_429_past_the_users_cap_as_a_turn_would(
    alice, session, settings
):
    """The inspector runs a turn's assembly, recall included: the same cap holds it."""
    settings.TURN_CAP_PER_USER = 1
    client = APIClient()
    client.force_authenticate(alice)
    url = f"/agents-api/sessions/{session.pk}/context"
    assert client.get(url).status_code == 200
    held = _hold(leases.USER_SLOT_PREFIX, alice.pk, 1)  # a turn of hers streams
    try:
        answer = client.get(url)
        assert answer.status_code == 429
        assert answer.json()["code"] == "busy"
    finally:
        for lease in held:
            leases.release(lease)
    assert client.get(url).status_code == 200
    assert not Lease.objects.exists()  # the inspector gave its slots back
