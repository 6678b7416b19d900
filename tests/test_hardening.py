"""The smaller findings of issue 20, each fixed: the OpenAPI schema behind login, API
answers never cached, tokens revoked on a password change and by their owner, the
websocket Origin checked with scheme and port, oversized bodies refused unread, and the
provider's own error text kept from users."""

from __future__ import annotations

import json
import logging
import re

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from driftless.asgi import application
from memory.actions.turn import do_send_message
from tests.test_consumer import login_cookie

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_background_evaluations():
    """A socket's disconnect schedules an evaluation in a timer thread: none here."""
    from memory.actions import scheduling

    previous = scheduling.set_background_starter(lambda **kwargs: None)
    yield
    scheduling.set_background_starter(previous)


def test_the_openapi_schema_needs_a_login(client, alice):
    assert client.get("/agents-api/schema/").status_code in (401, 403)
    client.force_login(alice)
    assert client.get("/agents-api/schema/").status_code == 200


def test_api_answers_are_never_stored_by_a_cache(client, alice, session):
    client.force_login(alice)
    for path in ("/agents-api/sessions/", f"/agents-api/sessions/{session.pk}/", "/agents-api/x"):
        assert client.get(path)["Cache-Control"] == "no-store", path


def _token_client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def test_a_password_change_revokes_the_users_api_tokens(alice):
    key = Token.objects.create(user=alice).key
    assert _token_client(key).get("/agents-api/sessions/").status_code == 200
    alice.first_name = "Alice"
    alice.save()  # another change keeps the token
    assert _token_client(key).get("/agents-api/sessions/").status_code == 200
    alice.set_password("a new secret")
    alice.save()
    assert _token_client(key).get("/agents-api/sessions/").status_code == 401
    assert not Token.objects.filter(user=alice).exists()


def test_the_owner_revokes_their_token_from_their_login(alice, bob):
    key = Token.objects.create(user=alice).key
    bobs = Token.objects.create(user=bob).key
    assert _token_client(key).delete("/agents-api/token").status_code in (401, 403)
    browser = APIClient(enforce_csrf_checks=False)
    browser.force_login(alice)
    assert browser.delete("/agents-api/token").status_code == 204
    assert _token_client(key).get("/agents-api/sessions/").status_code == 401
    assert Token.objects.filter(key=bobs).exists()  # only the caller's


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "host", "accepted"),
    [
        ("http://localhost", "localhost", True),
        ("http://localhost:8000", "localhost:8000", True),
        ("http://localhost:8080", "localhost:8000", False),  # another port
        ("https://localhost:8000", "localhost:8000", False),  # another scheme
        ("http://evil.example", "localhost", False),
    ],
)
async def test_the_websocket_origin_is_checked_with_scheme_and_port(
    alice, session, origin, host, accepted
):
    from channels.db import database_sync_to_async

    cookie = await database_sync_to_async(login_cookie)(alice)
    socket = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.pk}/",
        headers=[(b"origin", origin.encode()), (b"host", host.encode()), (b"cookie", cookie)],
    )
    connected, _ = await socket.connect()
    assert connected is accepted
    await socket.disconnect()


async def test_an_oversized_body_is_refused_before_it_is_read(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    read = []

    async def app(scope, receive, send):  # what must never run
        read.append(await receive())

    from driftless.body_limit import BodyLimit

    communicator = HttpCommunicator(
        BodyLimit(app),
        "POST",
        "/agents-api/sessions/",
        body=b"x" * 2000,
        headers=[(b"content-length", b"2000")],
    )
    response = await communicator.get_response()
    assert response["status"] == 413
    assert json.loads(response["body"])["code"] == "too_large"
    assert read == []


async def test_the_import_keeps_its_own_larger_limit(settings):
    from driftless.body_limit import body_limit

    settings.MEMORY_IMPORT_MAX_BYTES = 20 * 1024 * 1024
    assert body_limit("/agents-api/memory/import") == 20 * 1024 * 1024
    assert body_limit("/agents-api/sessions/") == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_the_providers_own_error_text_stays_in_the_log(session, fake_openai, caplog):
    detail = "Project proj_Ab12Cd34 in organization org-Zz99Yy88 has no access to gpt-9"
    fake_openai.fail(403, detail)
    with caplog.at_level(logging.ERROR, logger="driftless.errors"):
        result = do_send_message(session=session, content="hello?")
    shown = result.error.content
    assert "proj_" not in shown and "org-" not in shown
    assert shown.startswith("model endpoint returned HTTP 403")
    (error_id,) = re.findall(r"\(error id ([0-9a-f]{12})\)", shown)
    assert any(
        error_id in r.getMessage() and "proj_Ab12Cd34" in r.getMessage() for r in caplog.records
    )


def test_the_pages_that_cost_work_are_rate_limited_per_user(client, alice, bob, settings):
    settings.PAGE_RATE_PER_MINUTE = 3
    client.force_login(alice)
    codes = [client.get("/search/", {"q": "tea"}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert client.get("/search/", {"q": "tea"})["Retry-After"] == "60"
    other = APIClient()
    other.force_login(bob)
    assert other.get("/search/", {"q": "tea"}).status_code == 200  # a count per user
    assert client.get("/").status_code == 200  # other pages are not counted


@pytest.mark.django_db(transaction=True)
async def test_a_user_holds_a_bounded_number_of_sockets(alice, session, settings):
    from tests.test_consumer import open_socket

    settings.SOCKETS_PER_USER = 2
    first, ok1 = await open_socket(alice, session.pk)
    second, ok2 = await open_socket(alice, session.pk)
    third, ok3 = await open_socket(alice, session.pk)
    assert (ok1, ok2) == (True, True)
    assert ok3 == 1013  # refused: try again later
    await first.disconnect()
    fourth, ok4 = await open_socket(alice, session.pk)
    assert ok4 is True
    for socket in (second, fourth):
        await socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_frames_past_the_rate_are_dropped_and_the_socket_told_once(alice, session, settings):
    from tests.test_consumer import connected_socket, send

    settings.SOCKET_FRAMES_PER_MINUTE = 3
    socket = await connected_socket(alice, session.pk)
    try:
        for _ in range(6):
            await send(socket, {"type": "turn.retry"})
        codes = [(await socket.receive_json_from(timeout=10))["code"] for _ in range(4)]
        # The refusal is sent as the frame arrives; the consumer answers the others.
        assert sorted(codes) == ["nothing_to_retry"] * 3 + ["rate_limited"]
        assert await socket.receive_nothing(timeout=0.5)
    finally:
        await socket.disconnect()
