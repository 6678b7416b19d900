"""When things go wrong: an idle or dropped socket, a failed turn."""

import json
import re

import pytest

from chat.consumers import CLOSE_TRY_AGAIN_LATER, EVENTS_UNAVAILABLE_MESSAGE
from memory.events import error_event, publish
from memory.models import Message
from tests.browser.helpers import in_thread
from tests.browser.test_chat import wait_for_reply

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

SOCKET = re.compile(r"/ws/sessions/\d+/$")


def test_an_idle_socket_stays_open(open_chat, session, page):
    """Longer than the channel layer's blocking pop (5 s): the socket must not time out."""
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    page = open_chat(session)
    page.wait_for_timeout(7_000)
    assert page.locator("#conn").get_attribute("data-state") == "open"
    assert len(sockets) == 1 and not sockets[0].is_closed()


def test_the_draft_survives_a_dropped_socket_and_the_page_reconnects(open_chat, session, page):
    routes = []

    def proxy(ws):
        ws.connect_to_server()
        routes.append(ws)

    page.route_web_socket(SOCKET, proxy)
    evaluations = []
    page.on(
        "request",
        lambda r: evaluations.append(r.url) if r.url.endswith("/evaluate") else None,
    )
    page = open_chat(session)
    composer = page.get_by_label("Message Drift")
    composer.fill("a half-written thought")

    routes[0].close(code=1011, reason="server went away")
    page.wait_for_selector("#conn[data-state=closed]")
    assert page.locator("#composer-status").is_visible()
    composer.press("Enter")  # offline: nothing is sent and the draft stays
    assert composer.input_value() == "a half-written thought"

    page.wait_for_selector("#conn[data-state=open]", timeout=8_000)
    assert len(routes) == 2
    page.wait_for_timeout(2_500)  # the disconnect is an exit trigger, debounced
    assert len(evaluations) == 1
    assert page.locator("#composer-status").is_hidden()
    assert composer.input_value() == "a half-written thought"
    composer.press("Enter")
    wait_for_reply(page)
    assert session.messages.filter(role="user").get().content == "a half-written thought"


def test_events_unavailable_says_why_and_the_page_reconnects_by_itself(open_chat, session, page):
    """What the server does when the channel layer fails or a turn's events could not be
    delivered (issue 48): an error frame, then close code 4013. The page shows why and
    reconnects without a reload, and the next message is answered."""
    routes = []

    def proxy(ws):
        ws.connect_to_server()
        routes.append(ws)

    page.route_web_socket(SOCKET, proxy)
    page = open_chat(session)
    page.wait_for_selector("#conn[data-state=open]")
    status = page.locator("#composer-status")

    routes[0].send(json.dumps(error_event("events_unavailable", EVENTS_UNAVAILABLE_MESSAGE)))
    page.wait_for_function(
        "text => document.querySelector('#composer-status').textContent.includes(text)",
        arg="Live updates paused: " + EVENTS_UNAVAILABLE_MESSAGE,
    )
    routes[0].close(code=CLOSE_TRY_AGAIN_LATER, reason="")
    page.wait_for_selector("#conn[data-state=closed]")
    assert "reconnecting" in status.inner_text()

    page.wait_for_selector("#conn[data-state=open]", timeout=8_000)
    assert len(routes) == 2
    composer = page.get_by_label("Message Drift")
    composer.fill("Back again?")
    composer.press("Enter")
    wait_for_reply(page)
    assert session.messages.filter(role="user").get().content == "Back again?"


def test_a_draft_is_kept_across_a_reload(open_chat, session):
    page = open_chat(session)
    page.get_by_label("Message Drift").fill("remember me")
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.get_by_label("Message Drift").input_value() == "remember me"


def test_a_failed_turn_says_why_and_retry_answers_it(open_chat, session):
    session.append_message(role=Message.Role.USER, content="Plan my week")
    session.append_message(role=Message.Role.ERROR, content="the model endpoint timed out")
    page = open_chat(session)

    failure = page.locator(".failure")
    assert "the model endpoint timed out" in failure.inner_text()
    failure.get_by_role("button", name="Retry").click()
    wait_for_reply(page)
    assert page.locator(".failure").count() == 0
    roles = list(session.messages.order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "error", "assistant"]

    # A failure while the page is open arrives as an event, with its own Retry.
    in_thread(
        publish,
        session.pk,
        {"type": "turn.error", "turn_id": "t1", "error": "rate limited", "retryable": True},
    )
    page.locator(".failure").wait_for()
    assert "rate limited" in page.locator(".failure").inner_text()
    assert page.locator(".failure").get_by_role("button", name="Retry").is_visible()
