"""Live sockets follow the account, through the real ASGI application: a removed member,
a logout, a deactivation and a password change end access on open sockets, within
seconds, without a frame from the client; and each frame re-checks the caller."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from chat.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from driftless.asgi import application
from memory.actions import scheduling
from memory.models import Organization
from tests.test_consumer import finish_refused, send, stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

CLOSED_WITHIN = 5  # seconds: what "within seconds" means here


@pytest.fixture(autouse=True)
def scheduled():
    previous = scheduling.set_background_starter(lambda **kwargs: None)
    yield
    scheduling.set_background_starter(previous)


@database_sync_to_async
def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def open_socket(client: Client, session_id: int) -> tuple[WebsocketCommunicator, object]:
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    socket = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session_id}/",
        headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)],
    )
    connected, code = await socket.connect(timeout=10)
    if not connected:
        await finish_refused(socket)
    return socket, True if connected else code


async def closed_with(socket: WebsocketCommunicator) -> int:
    """The close code the server sends within CLOSED_WITHIN seconds, with no frame sent."""
    output = await socket.receive_output(timeout=CLOSED_WITHIN)
    assert output["type"] == "websocket.close", output
    return output["code"]


async def test_a_removed_member_cannot_open_a_socket(alice, session, organization):
    client = await logged_in(alice)
    await database_sync_to_async(organization.members.remove)(alice)
    _, refused = await open_socket(client, session.pk)
    assert refused == CLOSE_FORBIDDEN


async def test_removal_from_the_organization_closes_the_open_socket(alice, session, organization):
    socket, connected = await open_socket(await logged_in(alice), session.pk)
    assert connected is True
    await database_sync_to_async(organization.members.remove)(alice)
    assert await closed_with(socket) == CLOSE_FORBIDDEN


async def test_clearing_the_members_closes_the_open_socket(alice, session, organization):
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    await database_sync_to_async(organization.members.clear)()
    assert await closed_with(socket) == CLOSE_FORBIDDEN


async def test_leaving_from_the_users_side_closes_the_open_socket(alice, session, organization):
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    await database_sync_to_async(alice.organizations.remove)(organization)
    assert await closed_with(socket) == CLOSE_FORBIDDEN


async def test_a_frame_after_a_silent_removal_is_refused_and_closes_the_socket(
    alice, session, organization, fake_openai
):
    """No signal fires for a bulk delete of the membership rows: the frame's own check
    still refuses the turn."""
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    await database_sync_to_async(Organization.members.through.objects.filter(user=alice).delete)()
    await send(socket, {"type": "message.send", "content": "run a turn for me"})
    assert await closed_with(socket) == CLOSE_FORBIDDEN
    assert await stored(session) == []
    assert fake_openai.requests == []


async def test_logout_closes_the_sockets_of_that_login_only(alice, session):
    client, other_device = await logged_in(alice), await logged_in(alice)
    socket, _ = await open_socket(client, session.pk)
    other, _ = await open_socket(other_device, session.pk)
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    assert await closed_with(socket) == CLOSE_UNAUTHENTICATED
    assert await other.receive_nothing(timeout=1)  # still logged in on the other device
    await other.disconnect()


async def test_a_frame_after_logout_runs_no_turn(alice, session, fake_openai, settings):
    """Even without the logout notice (sent to a group the socket may have missed), a
    frame once ``SOCKET_LOGIN_RECHECK_SECONDS`` have passed finds the login session gone."""
    settings.SOCKET_LOGIN_RECHECK_SECONDS = 0
    client = await logged_in(alice)
    socket, _ = await open_socket(client, session.pk)
    await database_sync_to_async(client.session.delete)()
    await send(socket, {"type": "message.send", "content": "after logout"})
    assert await closed_with(socket) == CLOSE_UNAUTHENTICATED
    assert await stored(session) == []


async def test_deactivation_closes_the_open_socket(alice, session):
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    alice.is_active = False
    await database_sync_to_async(alice.save)()
    assert await closed_with(socket) == CLOSE_UNAUTHENTICATED


async def test_a_password_change_closes_the_open_socket(alice, session):
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    alice.set_password("a-new-long-password")
    await database_sync_to_async(alice.save)()
    assert await closed_with(socket) == CLOSE_UNAUTHENTICATED


async def test_another_users_account_change_leaves_the_socket_open(alice, bob, session):
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    bob.is_active = False
    await database_sync_to_async(bob.save)()
    assert await socket.receive_nothing(timeout=1)
    await socket.disconnect()


async def test_a_reply_streaming_when_the_member_is_removed_is_not_stored(
    alice, session, organization, fake_openai
):
    """Issue 45, item 10: the socket closed at once, but the reply was stored afterwards.
    The turn asks again before storing it: only an error record stays, in a session its
    removed user can no longer open."""
    fake_openai.reply_text("What the removed member must not get.", delay=2)
    socket, _ = await open_socket(await logged_in(alice), session.pk)
    await send(socket, {"type": "message.send", "content": "tell me"})
    for _ in range(200):
        if fake_openai.requests:
            break
        await asyncio.sleep(0.05)
    await database_sync_to_async(organization.members.remove)(alice)
    output = await socket.receive_output(timeout=CLOSED_WITHIN)
    while output["type"] == "websocket.send":  # the user's own message, echoed
        output = await socket.receive_output(timeout=CLOSED_WITHIN)
    assert output == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    rows = []
    for _ in range(300):
        rows = await stored(session)
        if rows and rows[-1][0] != "user":
            break
        await asyncio.sleep(0.05)
    assert [role for role, _ in rows] == ["user", "error"], rows
    assert all("must not get" not in content for _, content in rows)
