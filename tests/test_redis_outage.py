"""Redis is a speed-up, never the only copy: with the cache, the channel layer and the
broker on a private redis-server that each test kills, nothing the user sent is lost.

The app under test is pointed at that server (cache, channel layer and broker), so an
outage here is exactly what a production server sees when Redis stops.
"""

from __future__ import annotations

import contextlib
import time

import pytest
import redis
from asgiref.sync import sync_to_async
from celery.contrib.testing.worker import start_worker
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.core.cache import cache
from rest_framework.test import APIClient

from chat.consumers import CLOSE_TRY_AGAIN_LATER
from memory.actions import scheduling
from memory.actions.scheduling import sweep
from memory.infra.outage import channel_breaker
from memory.models import Message, Session, Topic
from tests.evaluation_helpers import SUBJECT_A, converse
from tests.faults import RedisServer, celery_broker, wait_for
from tests.test_consumer import connected_socket, open_socket, receive_until, send

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

TIMEOUT = 10


@pytest.fixture
def private_redis(settings):
    """A redis-server of this test's own, holding the cache and the channel layer."""
    server = RedisServer().start()
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"{server.url}/0",
            "OPTIONS": {"IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": 1},
        }
    }
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "driftless.channel_layer.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": f"{server.url}/1", "socket_timeout": 30}],
                "prefix": "outage",
            },
        }
    }
    channel_layers.backends.clear()
    try:
        yield server
    finally:
        server.kill()
        channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _no_background_evaluations():
    """A socket's disconnect schedules an evaluation two seconds later in a timer thread;
    recorded instead, so none outlives its test's database."""
    previous = scheduling.set_background_starter(lambda **kwargs: None)
    yield
    scheduling.set_background_starter(previous)


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def roles(session) -> list[str]:
    return list(session.messages.order_by("seq").values_list("role", flat=True))


def in_private_redis(server: RedisServer, db: int) -> int:
    return redis.Redis(port=server.port, db=db).dbsize()


@pytest.mark.django_db(transaction=True)
def test_a_rest_turn_with_redis_down_stores_both_messages_and_answers(
    private_redis, session, alice, fake_openai
):
    cache.set("probe", 1)
    assert in_private_redis(private_redis, 0) == 1  # the cache really is that server
    private_redis.kill()
    fake_openai.reply_text("Still here without Redis.")

    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Hello?"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert response.json()["reply"]["content"] == "Still here without Redis."
    assert roles(session) == ["user", "assistant"]
    # The turn lock held and was freed without Redis: the next turn runs too.
    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": "Again?"}, format="json"
    )
    assert response.status_code == 201
    assert roles(session) == ["user", "assistant", "user", "assistant"]


@pytest.mark.django_db(transaction=True)
def test_memory_context_and_a_new_topic_work_with_redis_down(private_redis, session, alice, agent):
    other = Session.objects.start(user=alice, agent=agent)
    converse(other, SUBJECT_A)
    Topic.objects.filter(session=other).update(
        title="Balcony garden", summary="Tomatoes and basil.", keep_in_memory=True
    )
    client = client_for(alice)
    assert client.get(f"/agents-api/sessions/{session.pk}/memory").status_code == 200
    assert in_private_redis(private_redis, 0) > 0  # the block was cached there
    private_redis.kill()

    memory = client.get(f"/agents-api/sessions/{session.pk}/memory")
    context = client.get(f"/agents-api/sessions/{session.pk}/context")
    topic = client.post(f"/agents-api/sessions/{session.pk}/topics/")

    assert memory.status_code == 200
    assert [entry["title"] for entry in memory.json()["entries"]] == ["Balcony garden"]
    assert context.status_code == 200
    assert "Balcony garden: Tomatoes and basil." in str(context.json())
    assert topic.status_code == 201
    assert session.topics.filter(is_active=True).get().pk == topic.json()["id"]


@pytest.mark.django_db(transaction=True)
async def test_a_socket_whose_channel_layer_fails_closes_with_an_error_frame_keeping_the_turn(
    private_redis, session, alice, fake_openai
):
    fake_openai.reply_text("Stored even so.", delay=1.0)
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True

    await send(socket, {"type": "message.send", "content": "Are you there?"})
    await receive_until(socket, "turn.started")
    await sync_to_async(private_redis.kill)()
    events = await receive_until(socket, "error")

    assert events[-1]["code"] == "events_unavailable"
    assert (await socket.receive_output(timeout=TIMEOUT)) == {
        "type": "websocket.close",
        "code": CLOSE_TRY_AGAIN_LATER,
    }
    await database_sync_to_async(wait_for)(
        lambda: roles(session) == ["user", "assistant"], TIMEOUT, "the turn to be stored"
    )
    await socket.wait(timeout=TIMEOUT)


@pytest.mark.django_db(transaction=True)
async def test_a_new_socket_during_the_outage_is_told_and_the_first_after_it_works(
    private_redis, session, alice, fake_openai
):
    # A socket before the outage, so the layer's pool holds connections Redis then drops.
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    await socket.disconnect()
    await sync_to_async(private_redis.kill)()
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "error" and frame["code"] == "events_unavailable"
    closed = await socket.receive_output(timeout=TIMEOUT)
    assert closed["code"] == CLOSE_TRY_AGAIN_LATER
    await socket.wait(timeout=TIMEOUT)

    await sync_to_async(private_redis.start)()
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    await send(socket, {"type": "message.send", "content": "Back?"})
    events = await receive_until(socket, "turn.done")
    assert events[-1]["ok"] is True
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
def test_an_evaluation_requested_during_the_outage_runs_after_it(
    private_redis, session, alice, fake_openai, settings
):
    """Full mode: the broker is on the private Redis too. The request is recorded in the
    database while the broker is down; once Redis is back the sweep enqueues it and a
    real worker runs it."""
    from driftless.celery import app

    converse(session, SUBJECT_A)
    settings.EVALUATION_SWEEP_GRACE_SECONDS = 0
    settings.DRIFT_DETECTOR = "lexical"
    with celery_broker(f"{private_redis.url}/2"):
        private_redis.kill()
        started = time.monotonic()
        response = client_for(alice).post(f"/agents-api/sessions/{session.pk}/evaluate")
        assert response.status_code == 202
        assert time.monotonic() - started < 10  # answered, not stuck on the broker
        session.refresh_from_db()
        assert session.evaluation_due_at is not None
        sweep()  # the broker is still down: the request stays due
        session.refresh_from_db()
        assert session.evaluation_due_at is not None

        private_redis.start()
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            # Once the broker's breaker closes (a few seconds), the sweep enqueues it.
            wait_for(lambda: sweep().evaluations == 1, 10, "the sweep to enqueue it")
            wait_for(
                lambda: session.topics.exclude(summarized_at=None).exists(),
                20,
                "the evaluation to run",
            )
    session.refresh_from_db()
    assert session.evaluation_due_at is None
    assert Message.objects.filter(session=session).count() == len(SUBJECT_A)


@pytest.mark.django_db(transaction=True)
async def test_after_a_redis_restart_the_first_new_socket_completes_a_turn(
    private_redis, session, alice, fake_openai
):
    """Killed and started again with no socket in between: the layer's pooled connections
    (and its reader of the process's channel) are stale, yet the first socket is served."""
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    await send(socket, {"type": "message.send", "content": "Before"})
    await receive_until(socket, "turn.done")
    await socket.disconnect()
    await sync_to_async(private_redis.kill)()
    await sync_to_async(private_redis.start)()

    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    await send(socket, {"type": "message.send", "content": "After the restart?"})
    events = await receive_until(socket, "turn.done")
    assert events[-1]["ok"] is True
    assert "turn.started" in [event["type"] for event in events]
    await socket.disconnect()


def _layer_failed_a_moment_ago() -> None:
    """As a REST turn during an outage leaves this process: the channel layer's breaker
    open for its cooldown (memory/infra/outage.py)."""
    with contextlib.suppress(ConnectionError), channel_breaker.watch():
        raise ConnectionError("Redis went away")
    assert not channel_breaker.allows()


@pytest.mark.django_db(transaction=True)
async def test_a_socket_that_joins_its_groups_ends_the_breakers_cooldown(
    private_redis, session, alice, fake_openai
):
    """Issue 48: Redis back, the breaker still open from the outage, the first socket's
    turn was skipped whole. Its join shows the layer answers: its events flow at once."""
    _layer_failed_a_moment_ago()
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    assert channel_breaker.allows()
    await send(socket, {"type": "message.send", "content": "Back?"})
    events = await receive_until(socket, "turn.done")
    assert "reply.delta" in [event["type"] for event in events]
    assert events[-1]["ok"] is True
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_turn_whose_events_were_not_delivered_tells_its_socket_and_closes_it(
    private_redis, session, alice, fake_openai
):
    """Events the breaker skipped are never lost in silence: the socket that sent the
    message is told, and closed with the code the page reconnects (and re-syncs) after."""
    socket, connected = await open_socket(alice, session.pk)
    assert connected is True
    _layer_failed_a_moment_ago()  # after the join: the turn's events are all skipped

    await send(socket, {"type": "message.send", "content": "Anyone?"})
    events = await receive_until(socket, "error")

    assert events[-1]["code"] == "events_unavailable"
    assert (await socket.receive_output(timeout=TIMEOUT)) == {
        "type": "websocket.close",
        "code": CLOSE_TRY_AGAIN_LATER,
    }
    await database_sync_to_async(wait_for)(
        lambda: roles(session) == ["user", "assistant"], TIMEOUT, "the turn to be stored"
    )
    await socket.wait(timeout=TIMEOUT)


@pytest.mark.django_db(transaction=True)
async def test_another_socket_of_the_session_is_told_of_events_it_did_not_get(
    private_redis, session, alice, fake_openai
):
    """A turn sent over REST (another tab, another client) while the breaker skipped its
    events: the open socket of the session is told once the layer answers, then closed;
    a socket opened after the miss is left alone."""
    missed_it = await connected_socket(alice, session.pk)
    _layer_failed_a_moment_ago()

    def rest_turn():
        return client_for(alice).post(
            f"/agents-api/sessions/{session.pk}/messages",
            {"content": "From elsewhere"},
            format="json",
        )

    response = await database_sync_to_async(rest_turn)()
    assert response.status_code == 201
    after_it = await connected_socket(alice, session.pk)

    events = await receive_until(missed_it, "error")

    assert [(e["type"], e.get("code")) for e in events] == [("error", "events_unavailable")]
    assert (await missed_it.receive_output(timeout=TIMEOUT)) == {
        "type": "websocket.close",
        "code": CLOSE_TRY_AGAIN_LATER,
    }
    await missed_it.wait(timeout=TIMEOUT)
    assert await after_it.receive_nothing(timeout=1)
    await after_it.disconnect()
