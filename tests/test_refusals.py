"""One refusal type, mapped once per interface: REST and the socket refuse the same input
with the same code, and admin, REST and the socket refuse the same busy session alike."""

from __future__ import annotations

import inspect

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

import chat.protocol
import memory.actions.curation
import memory.actions.deletion
import memory.actions.portability
import memory.actions.tools
import memory.actions.turn
import memory.stores.facts
import memory.stores.leases
import memory.stores.notes
import memory.stores.search
from memory.lib.errors import Refused
from memory.models import Session
from memory.stores.leases import session_lock
from tests.test_consumer import connected_socket, receive_until, send

pytestmark = [pytest.mark.django_db(transaction=True)]

BAD_MESSAGES = [
    ("", "empty_message"),
    ("   ", "empty_message"),
    (123, "wrong_type"),
    ("x" * 16_001, "message_too_long"),
    ("a\x00b", "invalid_text"),
]


def rest_code(user, session_id: int, content) -> tuple[int, str]:
    client = APIClient()
    client.force_authenticate(user)
    answer = client.post(
        f"/agents-api/sessions/{session_id}/messages", {"content": content}, format="json"
    )
    return answer.status_code, answer.json()["code"]


@pytest.mark.redis
@pytest.mark.parametrize(("content", "code"), BAD_MESSAGES)
async def test_the_same_bad_message_gets_the_same_code_over_rest_and_the_socket(
    alice, session, content, code
):
    status, over_rest = await database_sync_to_async(rest_code)(alice, session.pk, content)
    socket = await connected_socket(alice, session.pk)
    try:
        await send(socket, {"type": "message.send", "content": content})
        (error,) = await receive_until(socket, "error")
    finally:
        await socket.disconnect()
    assert (status, over_rest) == (400, code)
    assert error["code"] == code
    assert await database_sync_to_async(session.messages.count)() == 0  # nothing stored


@pytest.mark.redis
async def test_a_busy_session_is_refused_with_the_same_code_over_rest_and_the_socket(
    alice, session, settings
):
    settings.TURN_BUSY_WAIT_SECONDS = 0.2
    held = await database_sync_to_async(memory.stores.leases.acquire)(
        memory.stores.leases.turn_lease_name(session.pk)
    )
    try:
        status, over_rest = await database_sync_to_async(rest_code)(alice, session.pk, "Hello")
        socket = await connected_socket(alice, session.pk)
        try:
            await send(socket, {"type": "message.send", "content": "Hello"})
            (error,) = await receive_until(socket, "error")
        finally:
            await socket.disconnect()
    finally:
        await database_sync_to_async(memory.stores.leases.release)(held)
    assert (status, over_rest) == (409, "turn_in_progress")
    assert error["code"] == "turn_in_progress"


def test_deleting_a_session_from_admin_during_a_turn_is_refused_as_over_rest(
    client, alice, session, settings
):
    """The turn holds the session lock while it streams; an operator's delete waits for
    it like the user's own does, and is refused when the turn goes on."""
    settings.TURN_BUSY_WAIT_SECONDS = 0.2
    operator = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(operator)
    api = APIClient()
    api.force_authenticate(alice)
    with session_lock(session.pk):  # what a streaming turn holds
        page = client.post(
            f"/admin/memory/session/{session.pk}/delete/", {"post": "yes"}, follow=True
        )
        bulk = client.post(
            "/admin/memory/session/",
            {"action": "delete_selected", "_selected_action": [session.pk], "post": "yes"},
            follow=True,
        )
        rest = api.delete(f"/agents-api/sessions/{session.pk}/")
    messages = [
        str(message) for response in (page, bulk) for message in response.context["messages"]
    ]
    assert any("Not deleted" in m and "a reply is still being generated" in m for m in messages)
    assert not any(m.startswith("Deleted") for m in messages)
    assert (rest.status_code, rest.json()["code"]) == (409, "turn_in_progress")
    assert Session.objects.filter(pk=session.pk).exists()

    # Once the turn has ended, the operator's delete goes through.
    client.post(f"/admin/memory/session/{session.pk}/delete/", {"post": "yes"})
    assert not Session.objects.filter(pk=session.pk).exists()


REFUSAL_MODULES = [
    chat.protocol,
    memory.actions.curation,
    memory.actions.deletion,
    memory.actions.portability,
    memory.actions.tools,
    memory.actions.turn,
    memory.stores.facts,
    memory.stores.leases,
    memory.stores.notes,
    memory.stores.search,
]


def test_every_refusal_of_the_domain_derives_from_one_base():
    """Each exception class these modules define to say no is a Refused, with a code."""
    exceptions = {
        cls
        for module in REFUSAL_MODULES
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__ == module.__name__
    }
    internal = {"LeaseBusy", "StaleSummary"}  # control flow inside the domain, never answered
    refusals = {cls for cls in exceptions if cls.__name__ not in internal}
    assert {cls.__name__ for cls in refusals} >= {
        "CurationRefused",
        "DeletionRefused",
        "ImportRefused",
        "SearchError",
        "TurnBusy",
        "ServerStopping",
        "NothingToRetry",
        "FrameRefused",
        "FactError",
        "NotesError",
        "ToolError",
    }
    assert [cls.__name__ for cls in refusals if not issubclass(cls, Refused)] == []
    assert all(cls.code != Refused.code for cls in refusals if cls is not Refused)
