"""The session websocket through the real ASGI application (auth, origin check, routing)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from chat import consumers
from chat.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from chat.protocol import MAX_MESSAGE_CHARS
from driftless.asgi import application
from memory.actions import scheduling
from memory.lib.spec import EXIT_DEBOUNCE_SECONDS
from memory.models import Message, Session
from memory.stores.facts import read_facts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

TIMEOUT = 10


@pytest.fixture(autouse=True)
def scheduled():
    """Evaluations the pipeline schedules, recorded instead of run in a timer thread
    (which would outlive the test)."""
    calls: list[dict] = []
    previous = scheduling.set_background_starter(lambda **kwargs: calls.append(kwargs))
    yield calls
    scheduling.set_background_starter(previous)


def login_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_socket(user, session_id: int) -> tuple[WebsocketCommunicator, bool | int]:
    """The socket and True once accepted, or the close code it was refused with."""
    headers = [(b"origin", b"http://testserver")]
    if user is not None:
        headers.append((b"cookie", await database_sync_to_async(login_cookie)(user)))
    socket = WebsocketCommunicator(application, f"/ws/sessions/{session_id}/", headers=headers)
    connected, code = await socket.connect(timeout=TIMEOUT)
    if not connected:
        await finish_refused(socket)
    return socket, True if connected else code


async def finish_refused(socket: WebsocketCommunicator) -> None:
    """End the refused consumer inside the test, as a server does after the close.

    Left running, its channels-redis receive (a BZPOPMIN) outlives the test and the event
    loop's teardown waits on it: a cancelled read there only ends at the socket timeout.
    The disconnect is given a moment, then the communicator cancels the consumer."""
    await socket.disconnect(timeout=1)


async def connected_socket(user, session_id: int) -> WebsocketCommunicator:
    socket, connected = await open_socket(user, session_id)
    assert connected is True
    return socket


async def receive_until(socket: WebsocketCommunicator, event_type: str) -> list[dict]:
    events = []
    while not events or events[-1]["type"] != event_type:
        events.append(await socket.receive_json_from(timeout=TIMEOUT))
    return events


async def send(socket: WebsocketCommunicator, frame: dict | str) -> None:
    await socket.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))


@database_sync_to_async
def stored(session) -> list[tuple[str, str]]:
    return list(session.messages.order_by("seq").values_list("role", "content"))


async def test_the_owners_message_streams_deltas_then_the_final_reply(alice, session, fake_openai):
    fake_openai.reply_text("Hello Alice, nice to meet you.")
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "Hi, I'm Alice"})
    events = await receive_until(socket, "turn.done")

    types = [event["type"] for event in events]
    assert types[:2] == ["message.created", "turn.started"]
    assert events[0]["message"]["role"] == "user"
    assert events[0]["message"]["content"] == "Hi, I'm Alice"
    deltas = [event for event in events if event["type"] == "reply.delta"]
    assert len(deltas) > 1
    assert "".join(d["delta"] for d in deltas) == "Hello Alice, nice to meet you."
    turn_id = events[1]["turn_id"]
    assert {d["turn_id"] for d in deltas} == {turn_id}
    reply = events[-2]
    assert reply["type"] == "message.created" and reply["message"]["role"] == "assistant"
    assert reply["message"]["content"] == "Hello Alice, nice to meet you."
    assert types.index("message.created", 1) > max(
        i for i, t in enumerate(types) if t == "reply.delta"
    )
    assert events[-1] == {
        "type": "turn.done",
        "turn_id": turn_id,
        "reply_message_id": reply["message"]["id"],
        "ok": True,
        "stopped": False,
    }
    assert await stored(session) == [
        ("user", "Hi, I'm Alice"),
        ("assistant", "Hello Alice, nice to meet you."),
    ]
    await socket.disconnect()


@pytest.fixture(params=["bob", "charlie", "anonymous"])
def stranger(request):
    """bob (same organization), charlie (none) and an anonymous visitor."""
    return None if request.param == "anonymous" else request.getfixturevalue(request.param)


async def test_a_stranger_cannot_connect(session, stranger):
    socket, refused = await open_socket(stranger, session.pk)
    assert refused == (CLOSE_UNAUTHENTICATED if stranger is None else CLOSE_FORBIDDEN)


async def test_a_session_that_does_not_exist_cannot_be_joined(alice, session):
    socket, refused = await open_socket(alice, session.pk + 1000)
    assert refused == CLOSE_FORBIDDEN


async def test_a_socket_without_an_allowed_origin_is_refused(alice, session):
    cookie = await database_sync_to_async(login_cookie)(alice)
    socket = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.pk}/",
        headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)],
    )
    connected, code = await socket.connect(timeout=TIMEOUT)
    assert not connected and code == 1000  # refused by the origin check, before the consumer
    await finish_refused(socket)


async def test_a_tool_call_round_trip_stores_the_fact_and_the_model_sees_the_result(
    alice, agent, session, fake_openai
):
    (call_id,) = fake_openai.reply_tool_calls(
        [("important_info", {"operation": "$set", "key": "tea", "value": "green"})]
    )
    fake_openai.reply_text("Got it: green tea.")
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "My favourite tea is green"})
    events = await receive_until(socket, "turn.done")

    created = [event["message"] for event in events if event["type"] == "message.created"]
    assert [m["role"] for m in created] == ["user", "assistant", "tool", "assistant"]
    assert created[1]["tool_calls"][0]["function"]["name"] == "important_info"
    assert created[2]["tool_call_id"] == call_id and created[2]["tool_name"] == "important_info"
    assert json.loads(created[2]["content"])["ok"] is True
    assert await database_sync_to_async(read_facts)(user=alice, agent=agent) == {"tea": "green"}
    seen_by_model = fake_openai.requests[1]["messages"][-1]
    assert seen_by_model == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": created[2]["content"],
    }
    assert created[3]["content"] == "Got it: green tea."
    await socket.disconnect()


async def test_a_model_failure_mid_stream_keeps_the_message_and_sends_an_error_event(
    alice, session, fake_openai
):
    fake_openai.fail_mid_stream(content="a reply that never finishes properly", after=2)
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "Tell me everything"})
    events = await receive_until(socket, "turn.done")

    types = [event["type"] for event in events]
    assert types.count("reply.delta") == 2
    (error,) = [event for event in events if event["type"] == "turn.error"]
    assert error["retryable"] is True and "model endpoint" in error["error"]
    assert events[-1]["ok"] is False
    roles = [role for role, _ in await stored(session)]
    assert roles == ["user", "error"]
    assert (await stored(session))[0] == ("user", "Tell me everything")

    # The user retries: the same message is answered, not stored again.
    fake_openai.reply_text("Here is everything.")
    await send(socket, {"type": "turn.retry"})
    events = await receive_until(socket, "turn.done")
    assert events[-1]["ok"] is True
    assert [role for role, _ in await stored(session)] == ["user", "error", "assistant"]
    await socket.disconnect()


async def test_malformed_and_oversized_frames_get_error_events_and_the_socket_stays_open(
    alice, session, fake_openai
):
    socket = await connected_socket(alice, session.pk)
    bad_frames = [
        ("{not json", "malformed_json"),
        ('["a", "list"]', "invalid_frame"),
        ({"type": "message.delete"}, "unknown_type"),
        ({"type": "message.send"}, "wrong_type"),
        ({"type": "message.send", "content": "  \n "}, "empty_message"),
        ({"type": "message.send", "content": "x" * (MAX_MESSAGE_CHARS + 1)}, "message_too_long"),
        ("x" * 200_000, "frame_too_large"),
        ({"type": "turn.retry"}, "nothing_to_retry"),
    ]
    for frame, code in bad_frames:
        await send(socket, frame)
        event = await socket.receive_json_from(timeout=TIMEOUT)
        assert event["type"] == "error" and event["code"] == code, frame
        assert event["message"]
    await socket.send_to(bytes_data=b"\x00\x01")
    assert (await socket.receive_json_from(timeout=TIMEOUT))["code"] == "binary_frame"

    fake_openai.reply_text("Still here.")
    await send(socket, {"type": "message.send", "content": "Are you still there?"})
    events = await receive_until(socket, "turn.done")
    assert events[-2]["message"]["content"] == "Still here."
    assert await stored(session) == [("user", "Are you still there?"), ("assistant", "Still here.")]
    await socket.disconnect()


async def test_a_second_send_while_a_reply_is_generated_is_refused(alice, session, fake_openai):
    fake_openai.reply_text("A slow answer.", delay=1.0)
    socket = await connected_socket(alice, session.pk)
    other_tab = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "First"})
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "message.created"
    await send(socket, {"type": "message.send", "content": "Second"})
    await send(other_tab, {"type": "topic.new"})

    events = await receive_until(socket, "turn.done")
    (refused,) = [event for event in events if event["type"] == "error"]
    assert refused["code"] == "turn_in_progress"
    assert refused["message"] == "a reply is still being generated"
    tab_events = await receive_until(other_tab, "turn.done")
    assert [e["code"] for e in tab_events if e["type"] == "error"] == ["turn_in_progress"]
    assert await stored(session) == [("user", "First"), ("assistant", "A slow answer.")]
    await socket.disconnect()
    await other_tab.disconnect()


async def test_the_next_message_sent_the_moment_turn_done_arrives_is_accepted(
    alice, session, fake_openai, monkeypatch
):
    """A script (or a UI sending a queued message) answers turn.done at once; the worker
    thread may still be tidying up then, which must not count as a turn in progress."""
    tidy_up = consumers.close_old_connections

    def slow_tidy_up():
        time.sleep(0.5)
        tidy_up()

    monkeypatch.setattr(consumers, "close_old_connections", slow_tidy_up)
    fake_openai.reply_text("First answer.")
    fake_openai.reply_text("Second answer.")
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "First"})
    await receive_until(socket, "turn.done")
    await send(socket, {"type": "message.send", "content": "Second"})
    events = await receive_until(socket, "turn.done")

    assert [e for e in events if e["type"] == "error"] == []
    assert events[-1]["ok"] is True
    assert await stored(session) == [
        ("user", "First"),
        ("assistant", "First answer."),
        ("user", "Second"),
        ("assistant", "Second answer."),
    ]
    await socket.disconnect()


async def test_two_tabs_on_one_session_both_see_the_conversation(alice, session, fake_openai):
    fake_openai.reply_text("Seen by both tabs.")
    first = await connected_socket(alice, session.pk)
    second = await connected_socket(alice, session.pk)

    await send(first, {"type": "message.send", "content": "Hello from tab one"})

    for socket in (first, second):
        events = await receive_until(socket, "turn.done")
        assert events[0]["message"]["content"] == "Hello from tab one"
        assert "".join(e["delta"] for e in events if e["type"] == "reply.delta") == (
            "Seen by both tabs."
        )
        assert events[-2]["message"]["content"] == "Seen by both tabs."
    await first.disconnect()
    await second.disconnect()


async def test_a_new_topic_frame_starts_a_topic_and_announces_it(alice, session):
    first_topic = await database_sync_to_async(session.active_topic)()
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "topic.new"})
    event = await socket.receive_json_from(timeout=TIMEOUT)

    assert event["type"] == "topic.created"
    assert event["previous"]["id"] == first_topic.pk
    assert event["topic"]["is_active"] and event["topic"]["origin"] == "user"
    await socket.disconnect()


async def test_a_disconnect_schedules_one_debounced_evaluation(alice, session, scheduled):
    socket = await connected_socket(alice, session.pk)
    assert scheduled == []

    await socket.disconnect()

    assert len(scheduled) == 1
    (call,) = scheduled
    assert call["session_id"] == session.pk and call["reason"] == "exit"
    assert call["delay"] == EXIT_DEBOUNCE_SECONDS
    session = await database_sync_to_async(Session.objects.get)(pk=session.pk)
    assert call["debounce_token"] == session.evaluation_due_at.isoformat()


async def test_a_refused_stranger_schedules_no_evaluation(bob, session, scheduled):
    socket, refused = await open_socket(bob, session.pk)
    assert refused == CLOSE_FORBIDDEN
    assert scheduled == []
    assert not await database_sync_to_async(Message.objects.exists)()


async def test_mcp_tools_work_from_the_turns_worker_thread(
    alice, agent, session, fake_openai, settings
):
    server = Path(__file__).with_name("mcp_echo_server.py")
    settings.MCP_SERVERS = {"echo": {"name": "echo", "command": [sys.executable, str(server)]}}
    agent.mcp_servers = ["echo"]
    await database_sync_to_async(agent.save)(update_fields=["mcp_servers"])
    fake_openai.reply_tool_calls([("mcp__echo__echo", {"text": "over the socket"})])
    fake_openai.reply_text("Echoed.")
    socket = await connected_socket(alice, session.pk)

    await send(socket, {"type": "message.send", "content": "Echo something"})
    events = await receive_until(socket, "turn.done")

    results = [e["message"] for e in events if e["type"] == "message.created"]
    assert json.loads(results[2]["content"]) == {"result": "echo: over the socket"}
    assert events[-1]["ok"] is True
    await socket.disconnect()


async def test_deleting_a_topic_then_the_session_tells_the_open_sockets_and_closes_them(
    alice, session
):
    from memory.actions.deletion import do_delete_session, do_delete_topic
    from tests.memory_builders import add_topic

    earlier = await database_sync_to_async(add_topic)(session, title="Old", messages=2)
    socket = await connected_socket(alice, session.pk)

    await database_sync_to_async(do_delete_topic)(topic=earlier, deleted_by=alice)
    assert await socket.receive_json_from(timeout=TIMEOUT) == {
        "type": "topic.deleted",
        "topic_id": earlier.pk,
    }
    await database_sync_to_async(do_delete_session)(session=session, deleted_by=alice)
    assert await socket.receive_json_from(timeout=TIMEOUT) == {
        "type": "session.deleted",
        "session_id": session.pk,
    }
    assert await socket.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": CLOSE_FORBIDDEN,
    }
    await socket.disconnect(timeout=1)
