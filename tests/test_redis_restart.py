"""After its Redis restarts, a real server (driftless/serve.py) serves the first socket
opened on it: the turn's events reach it (issue 20: nothing came within 20 s, and only
the second socket worked)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.faults import app_env
from tests.live_server import make_serve_server, running_server
from tests.test_server_faults import redis_server, serve  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 20


def _cookie(user) -> str:
    browser = Client()
    browser.force_login(user)
    return f"sessionid={browser.cookies['sessionid'].value}"


def _open(url: str, session_id: int, cookie: str):
    from websockets.sync.client import connect

    ws_url = url.replace("http", "ws") + f"/ws/sessions/{session_id}/"
    return connect(ws_url, origin=url, additional_headers={"Cookie": cookie}, open_timeout=TIMEOUT)


def _turn(url: str, session_id: int, cookie: str, content: str) -> list[dict]:
    events = []
    with _open(url, session_id, cookie) as socket:
        socket.send(json.dumps({"type": "message.send", "content": content}))
        while not events or events[-1]["type"] not in ("turn.done", "error"):
            events.append(json.loads(socket.recv(timeout=TIMEOUT)))
    return events


def test_after_a_redis_restart_the_first_new_socket_completes_a_turn(
    serve,  # noqa: F811
    redis_server,  # noqa: F811
    session,
    alice,
    fake_openai,
):
    server = serve()
    cookie = _cookie(alice)
    assert _turn(server.url, session.pk, cookie, "Before")[-1]["type"] == "turn.done"
    redis_server.kill()
    redis_server.start()

    events = _turn(server.url, session.pk, cookie, "After the restart?")
    assert [e["type"] for e in events if e["type"] in ("turn.started", "turn.done")] == [
        "turn.started",
        "turn.done",
    ]
    assert events[-1]["ok"] is True


def test_after_a_redis_restart_make_serves_processes_serve_the_first_sockets(
    redis_server,  # noqa: F811
    session,
    alice,
    fake_openai,
):
    """``make serve``'s two processes (uvicorn): sockets before the outage on both, then
    every socket after the restart completes its turn, the first one included."""
    env = app_env(redis=redis_server, openai_base_url=fake_openai.base_url)
    env.pop("DEBUG", None)
    cookie = _cookie(alice)
    with running_server(env, server=make_serve_server) as url:
        for n in range(4):
            assert _turn(url, session.pk, cookie, f"Before {n}")[-1]["type"] == "turn.done"
        idle = [_open(url, session.pk, cookie) for _ in range(4)]  # open across the outage
        redis_server.kill()
        for socket in idle:  # each is told, and closed by the server
            frame = json.loads(socket.recv(timeout=TIMEOUT))
            assert (frame["type"], frame["code"]) == ("error", "events_unavailable")
            socket.close()
        redis_server.start()
        for n in range(4):
            events = _turn(url, session.pk, cookie, f"After the restart {n}")
            assert events[-1]["type"] == "turn.done", (n, events)
