"""Hostile input gets a clear 400 (REST) or an error frame (socket), never a 500, a dead
socket or something stored that the caller did not send. Each case is one finding of the
attack on the API (issue 11): the same checks (memory/lib/validation.py) answer both.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from driftless.asgi import application
from memory.lib.limits import MAX_JSON_DEPTH
from memory.models import ImportantInfo, Message, Session
from memory.stores.facts import read_facts
from tests.test_consumer import TIMEOUT, connected_socket, send

NUL_VALUES = [
    "a\u0000b",
    {"nested": ["ok", "a\u0000b"]},
    {"a\u0000b": "key of a value"},
    [[{"deep": {"deeper": "\u0000"}}]],
]


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def put_raw(client: APIClient, url: str, body: str):
    """A body sent as written (JSON escapes such as a lone ``\\ud83d`` intact)."""
    return client.generic("PUT", url, body, content_type="application/json")


def deep_json(depth: int, inner: str = '"x"') -> str:
    return '{"content": ' + "[" * depth + inner + "]" * depth + "}"


# --- REST: facts ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", NUL_VALUES, ids=["flat", "nested", "dict-key", "deep"])
def test_a_nul_anywhere_in_a_fact_value_is_a_400_and_nothing_is_stored(
    alice, agent, session, value
):
    response = client_for(alice).put(
        f"/agents-api/sessions/{session.pk}/facts/colour", {"value": value}, format="json"
    )
    assert response.status_code == 400
    assert "NUL" in response.json()["errors"]["value"][0]
    assert read_facts(user=alice, agent=agent) == {}


@pytest.mark.parametrize(
    "body",
    [
        '{"value": "a\\ud83db"}',
        '{"value": {"k": ["\\udc00"]}}',
        '{"value": {"\\ud800": 1}}',
    ],
    ids=["flat", "nested", "dict-key"],
)
def test_a_lone_surrogate_in_a_fact_value_is_a_400_and_nothing_is_stored(
    alice, agent, session, body
):
    response = put_raw(client_for(alice), f"/agents-api/sessions/{session.pk}/facts/colour", body)
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["errors"]["value"][0]
    assert read_facts(user=alice, agent=agent) == {}


def test_a_nul_in_the_fact_key_is_a_400_and_nothing_is_stored(alice, agent, session):
    response = client_for(alice).put(
        f"/agents-api/sessions/{session.pk}/facts/a%00b", {"value": "v"}, format="json"
    )
    assert response.status_code == 400
    assert "NUL" in response.json()["errors"]["key"][0]
    assert read_facts(user=alice, agent=agent) == {}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("key", ["%ED%A0%80", "%FF%FE", "ok%C3"])
async def test_a_fact_key_that_is_not_utf8_is_a_400_over_asgi(alice, agent, session, key):
    """As daphne hands it over: ``path`` decoded with replacement characters (so the
    key would be stored as "���"), ``raw_path`` as sent."""
    token = await database_sync_to_async(lambda: Token.objects.create(user=alice).key)()
    raw_path = f"/agents-api/sessions/{session.pk}/facts/{key}".encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": unquote(raw_path.decode("ascii")),
        "raw_path": raw_path,
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Token {token}".encode()),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b'{"value": "v"}'})
    start = await app.receive_output(timeout=TIMEOUT)
    body = await app.receive_output(timeout=TIMEOUT)
    assert start["status"] == 400, body
    assert b"UTF-8" in body["body"]
    facts = await database_sync_to_async(read_facts)(user=alice, agent=agent)
    assert facts == {}


def test_a_fact_key_in_plain_unicode_is_stored_as_sent(alice, agent, session):
    response = client_for(alice).put(
        f"/agents-api/sessions/{session.pk}/facts/caf%C3%A9%20%F0%9F%8D%B5",
        {"value": "v"},
        format="json",
    )
    assert response.status_code == 200
    assert read_facts(user=alice, agent=agent) == {"café 🍵": "v"}


def test_a_fact_value_nested_past_the_limit_is_a_400(alice, agent, session):
    value: object = "x"
    for _ in range(MAX_JSON_DEPTH + 1):
        value = [value]
    response = client_for(alice).put(
        f"/agents-api/sessions/{session.pk}/facts/deep", {"value": value}, format="json"
    )
    assert response.status_code == 400
    assert read_facts(user=alice, agent=agent) == {}


# --- REST: messages and sessions ------------------------------------------------------------


def test_a_body_nested_2000_deep_is_a_400_not_a_recursion_error(alice, session):
    response = client_for(alice).generic(
        "POST",
        f"/agents-api/sessions/{session.pk}/messages",
        deep_json(2000),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "nested deeper" in response.json()["detail"]
    assert not session.messages.exists()


def test_brackets_inside_strings_do_not_count_as_nesting(alice, session, fake_openai):
    fake_openai.reply_text("Brackets!")
    content = "[" * 5000 + "{" * 5000
    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": content}, format="json"
    )
    assert response.status_code == 201
    assert session.messages.get(role="user").content == content


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (123, "must be text"),
        (True, "must be text"),
        (["hello"], "must be text"),
        ({"text": "hello"}, "must be text"),
        (None, "null"),
        ("a\u0000b", "NUL"),
    ],
)
def test_message_content_that_is_not_text_is_refused_not_coerced(alice, session, content, says):
    response = client_for(alice).post(
        f"/agents-api/sessions/{session.pk}/messages", {"content": content}, format="json"
    )
    assert response.status_code == 400
    assert says in response.json()["errors"]["content"][0]
    assert not session.messages.exists()


def test_a_lone_surrogate_in_message_content_is_refused(alice, session):
    response = client_for(alice).generic(
        "POST",
        f"/agents-api/sessions/{session.pk}/messages",
        '{"content": "tea \\ud83d time"}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["errors"]["content"][0]
    assert not session.messages.exists()


@pytest.mark.parametrize(
    ("make_body", "field"),
    [
        (lambda agent: {"agent": agent.pk, "title": 5}, "title"),
        (lambda agent: {"agent": agent.pk, "title": "a\u0000b"}, "title"),
        (lambda agent: {"agent": agent.pk, "title": "t" * 201}, "title"),
        (lambda agent: {"agent": agent.pk + 0.5}, "agent"),
        (lambda agent: {"agent": str(agent.pk)}, "agent"),
        (lambda agent: {"agent": True}, "agent"),
    ],
    ids=["title-number", "title-nul", "title-long", "agent-float", "agent-text", "agent-bool"],
)
def test_starting_a_session_refuses_coercible_input(alice, agent, make_body, field):
    response = client_for(alice).post("/agents-api/sessions/", make_body(agent), format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not Session.objects.exists()


def test_a_form_encoded_body_is_refused_the_api_reads_json_only(alice, agent):
    response = client_for(alice).post("/agents-api/sessions/", {"agent": agent.pk})
    assert response.status_code == 415
    assert not Session.objects.exists()


# --- the socket -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.redis
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type": "message.send", "content": "a\\u0000b"}', "invalid_text"),
        ('{"type": "message.send", "content": "tea \\ud83d time"}', "invalid_text"),
        ('{"type": "message.send", "content": 123}', "wrong_type"),
        ('{"type": "message.send", "content": ["hi"]}', "wrong_type"),
        ('{"type": "message.send", "content": ' + "[" * 5000 + "]" * 5000 + "}", "json_too_deep"),
        ("[" * 5000 + "]" * 5000, "json_too_deep"),
    ],
    ids=["nul", "lone-surrogate", "number", "list", "deep-content", "deep-frame"],
)
async def test_hostile_frames_get_an_error_frame_and_the_socket_stays_open(
    alice, session, fake_openai, frame, code
):
    socket = await connected_socket(alice, session.pk)
    await send(socket, frame)
    event = await socket.receive_json_from(timeout=TIMEOUT)
    assert (event["type"], event["code"]) == ("error", code)
    assert event["message"]
    assert await database_sync_to_async(Message.objects.filter(session=session).count)() == 0
    # The socket is still open and still works.
    await send(socket, {"type": "turn.retry"})
    assert (await socket.receive_json_from(timeout=TIMEOUT))["code"] == "nothing_to_retry"
    await socket.disconnect()


# --- limits on facts ------------------------------------------------------------------------


def test_the_401st_fact_is_refused_through_rest_with_the_limit_named(alice, agent, session):
    full = {f"fact {index}": "x" for index in range(400)}
    ImportantInfo.objects.create(
        user=alice, agent=agent, organization=agent.organization, data=full
    )
    client = client_for(alice)
    url = f"/agents-api/sessions/{session.pk}/facts/"
    response = client.put(url + "one%20more", {"value": "y"}, format="json")
    assert response.status_code == 400
    assert "limit is 400" in response.json()["errors"]["facts"][0]
    assert read_facts(user=alice, agent=agent) == full
    # Changing a fact that exists is still allowed at the limit.
    assert client.put(url + "fact%200", {"value": "z"}, format="json").status_code == 200


def test_a_fact_over_the_token_budget_is_refused_through_rest_with_the_room_left(
    alice, agent, session
):
    client = client_for(alice)
    url = f"/agents-api/sessions/{session.pk}/facts/"
    for stored in range(40):  # each value is about 500 tokens: the budget ends it at 16
        response = client.put(url + f"note{stored}", {"value": "v" * 1990}, format="json")
        if response.status_code != 200:
            break
    assert response.status_code == 400
    message = response.json()["errors"]["facts"][0]
    assert "limit is 8000" in message and "left" in message
    assert 10 <= stored < 20
    assert len(read_facts(user=alice, agent=agent)) == stored


def test_the_agents_tool_says_which_limit_and_how_much_room_is_left(alice, agent, session):
    from memory.actions.tools import dispatch_tool_calls
    from memory.llm import ToolCall

    def set_fact_by_tool(key: str, value: str) -> dict:
        arguments = json.dumps({"operation": "$set", "key": key, "value": value})
        (message,) = dispatch_tool_calls(
            session=session,
            tool_calls=[ToolCall(id="c", name="important_info", arguments=arguments)],
        )
        return json.loads(message.content)

    for index in range(30):
        result = set_fact_by_tool(f"note{index}", "v" * 1990)
        if "error" in result:
            break
    assert result["limit"] == "facts tokens" and result["max"] == 8000
    assert 0 <= result["room"] < 500 and result["used"] + result["room"] == 8000
    assert "8000" in result["error"]

    ImportantInfo.objects.filter(user=alice).update(data={f"k{i}": "x" for i in range(400)})
    result = set_fact_by_tool("one more", "y")
    assert (result["limit"], result["max"], result["room"]) == ("facts", 400, 0)
    assert len(read_facts(user=alice, agent=agent)) == 400


def test_admin_refuses_a_facts_document_past_the_limits(client, alice, agent):
    from django.contrib.auth import get_user_model

    operator = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client.force_login(operator)
    document = ImportantInfo.objects.create(
        user=alice, agent=agent, organization=agent.organization, data={"tea": "green"}
    )
    url = f"/admin/memory/importantinfo/{document.pk}/change/"
    too_many = json.dumps({f"k{i}": "x" for i in range(401)})
    response = client.post(url, {"data": too_many})
    assert response.status_code == 200  # the form again, with the error
    assert "limit is 400" in response.content.decode()
    nul = json.dumps({"tea": "a\u0000b"})
    assert "NUL" in client.post(url, {"data": nul}).content.decode()
    document.refresh_from_db()
    assert document.data == {"tea": "green"}


# --- a real server: the frame size limit and addresses that are not UTF-8 -------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_frame_past_a_mebibyte_is_answered_frame_too_large_on_a_still_open_socket(alice, session):
    """daphne itself drops frames past its own limit; the settings raise it above the
    protocol's so the application answers, as docs/websocket.md promises."""
    from django.test import Client
    from websockets.sync.client import connect

    from tests.live_server import running_server

    browser = Client()
    browser.force_login(alice)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    token = Token.objects.create(user=alice).key
    with running_server() as url:
        ws_url = url.replace("http", "ws") + f"/ws/sessions/{session.pk}/"
        with connect(
            ws_url,
            origin=url,
            additional_headers={"Cookie": cookie},
            max_size=None,
            open_timeout=TIMEOUT,
        ) as socket:
            socket.send("x" * 1_049_000)
            event = json.loads(socket.recv(timeout=TIMEOUT))
            assert (event["type"], event["code"]) == ("error", "frame_too_large")
            socket.send(json.dumps({"type": "turn.retry"}))
            assert json.loads(socket.recv(timeout=TIMEOUT))["code"] == "nothing_to_retry"

        # Through the real server, %ED%A0%80 reaches the app as replacement characters;
        # the raw address is what is checked.
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            f"{url}/agents-api/sessions/{session.pk}/facts/%ED%A0%80",
            data=b'{"value": "v"}',
            method="PUT",
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=TIMEOUT)
        assert refused.value.code == 400
    assert read_facts(user=alice, agent=session.agent) == {}
