"""Turns survive the server dying: a real daphne (driftless/serve.py, as `make run` starts
it) killed or stopped mid-turn, in its own process group.

A slow reply from the fake model server holds the turn open, so "mid-turn" is exact.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from rest_framework.authtoken.models import Token

from memory.models import Lease, Session
from memory.stores.leases import TURN_LEASE_PREFIX, turn_lease_name
from memory.stores.messages import INTERRUPTED_TEXT
from tests.faults import RedisServer, Spawned, app_env, free_port, python, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SLOW_REPLY_SECONDS = 60.0


@pytest.fixture
def redis_server():
    server = RedisServer().start()
    yield server
    server.kill()


class Server:
    """A daphne process serving the app on this run's test database."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        argv = python("-m", "driftless.serve", "-b", "127.0.0.1", "-p", str(self.port))
        self.process = Spawned([*argv, "driftless.asgi:application"], env, "daphne")
        wait_for(self._up, 30, "daphne to start")

    def _up(self) -> bool:
        assert self.process.alive(), self.process.output()[-3000:]
        try:
            with urllib.request.urlopen(f"{self.url}/login/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, path: str, token: str, body: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body or {}).encode(),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")


@pytest.fixture
def serve(redis_server, fake_openai):
    started: list[Server] = []

    def start() -> Server:
        env = app_env(redis=redis_server, openai_base_url=fake_openai.base_url, DEBUG="true")
        started.append(Server(env))
        return started[-1]

    yield start
    for server in started:
        server.process.kill()


def send_in_background(server: Server, path: str, token: str, content: str) -> list:
    """POST a message from a thread (its server may die under it); the outcome lands in
    the returned list."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(server.post(path, token, {"content": content}))
        except OSError as error:
            outcome.append(error)

    threading.Thread(target=run, daemon=True).start()
    return outcome


def roles_and_contents(session) -> list[tuple[str, str]]:
    return list(session.messages.order_by("seq").values_list("role", "content"))


def test_a_server_killed_mid_turn_frees_the_session_and_leaves_an_error_record(
    serve, session, alice, fake_openai
):
    token = Token.objects.create(user=alice).key
    path = f"/agents-api/sessions/{session.pk}/messages"
    fake_openai.reply_text("This reply never arrives.", delay=SLOW_REPLY_SECONDS)
    first = serve()
    send_in_background(first, path, token, "Plan my week")
    wait_for(lambda: fake_openai.requests, 30, "the turn to reach the model")

    first.process.kill()
    second = serve()
    killed_at = time.monotonic()
    status, body = wait_for(
        lambda: (
            (answer := second.post(path, token, {"content": "Still there?"}))[0] != 409 and answer
        ),
        40,
        "the session to accept a new message",
    )

    assert status == 201, body
    assert time.monotonic() - killed_at < 40
    assert roles_and_contents(session) == [
        ("user", "Plan my week"),
        ("error", INTERRUPTED_TEXT),
        ("user", "Still there?"),
        ("assistant", fake_openai.default_text),
    ]


@pytest.mark.parametrize("reply_seconds", [2.0, SLOW_REPLY_SECONDS], ids=["finishes", "too-slow"])
def test_sigterm_mid_turn_ends_or_marks_the_turn_and_the_server_exits(
    serve, session, alice, fake_openai, reply_seconds
):
    token = Token.objects.create(user=alice).key
    path = f"/agents-api/sessions/{session.pk}/messages"
    fake_openai.reply_text("Your week, planned.", delay=reply_seconds)
    server = serve()
    outcome = send_in_background(server, path, token, "Plan my week")
    wait_for(lambda: fake_openai.requests, 30, "the turn to reach the model")

    server.process.signal(signal.SIGTERM)
    server.process.process.wait(timeout=15)

    rows = roles_and_contents(session)
    if reply_seconds < 5:
        assert rows == [("user", "Plan my week"), ("assistant", "Your week, planned.")]
        wait_for(lambda: outcome, 5, "the answer")
        assert outcome[0][0] == 201
    else:
        assert rows == [("user", "Plan my week"), ("error", INTERRUPTED_TEXT)]
    assert not Lease.objects.filter(name=turn_lease_name(session.pk)).exists()
    assert "turn(s) marked interrupted" in server.process.output()


class MultiServer(Server):
    """``make serve``'s supervisor and its two uvicorn processes (driftless/multiserve.py)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        argv = python("-m", "driftless.multiserve", "--port", str(self.port), "--workers", "2")
        self.process = Spawned(argv, env, "multiserve")
        wait_for(self._up, 60, "make serve's processes to start")


def test_sigterm_on_make_serve_completes_the_short_reply_and_marks_the_long_one(
    redis_server, fake_openai, session, alice, agent
):
    """Issue 45, item 4: two replies streaming when make serve gets SIGTERM."""
    env = app_env(redis=redis_server, openai_base_url=fake_openai.base_url, DEBUG="true")
    token = Token.objects.create(user=alice).key
    other = Session.objects.start(user=alice, agent=agent)
    fake_openai.reply_text("Short and done.", delay=3.0)
    fake_openai.reply_text("This reply never arrives.", delay=SLOW_REPLY_SECONDS)
    server = MultiServer(env)
    try:
        short = send_in_background(
            server, f"/agents-api/sessions/{session.pk}/messages", token, "Quick one"
        )
        wait_for(lambda: len(fake_openai.requests) == 1, 30, "the short turn to reach the model")
        send_in_background(server, f"/agents-api/sessions/{other.pk}/messages", token, "Long one")
        wait_for(lambda: len(fake_openai.requests) == 2, 30, "the long turn to reach the model")

        server.process.signal(signal.SIGTERM)
        server.process.process.wait(timeout=30)
    finally:
        server.process.kill()

    assert roles_and_contents(session) == [("user", "Quick one"), ("assistant", "Short and done.")]
    assert roles_and_contents(other) == [("user", "Long one"), ("error", INTERRUPTED_TEXT)]
    wait_for(lambda: short, 5, "the short reply's answer")
    assert short[0][0] == 201, short
    assert not Lease.objects.filter(
        name__in=[turn_lease_name(session.pk), turn_lease_name(other.pk)]
    )
    assert not Lease.objects.filter(name__startswith=TURN_LEASE_PREFIX).exists()
