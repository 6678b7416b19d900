"""Stop (issue 24): the Stop button and Esc end a streaming reply at once; what had
streamed is stored, marked stopped, and the model's stream is closed."""

import pytest

from memory.models import Message

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

STREAMING = """() =>
    (document.querySelector('.part.is-streaming .md')?.textContent || '').length > 20"""
STOPPED = """() => !document.querySelector('.part.is-streaming')
    && document.querySelector('.msg-assistant .part[data-message-id] .stopped-note')"""


def start_reply(page, text: str) -> None:
    page.get_by_label("Message Drift").fill(text)
    page.keyboard.press("Enter")
    page.wait_for_function(STREAMING)


def stored_reply(session) -> Message:
    return session.messages.filter(role=Message.Role.ASSISTANT).order_by("-seq").first()


def test_stop_ends_a_streaming_reply_within_a_second_and_keeps_it_marked_stopped(
    open_slow_chat, session, slow_model
):
    page = open_slow_chat(session)
    slow_model.cut.clear()
    start_reply(page, "Tell me a very long story")
    stop = page.get_by_role("button", name="Stop the reply (Esc)")
    assert stop.is_visible()

    stop.click()
    # The bar: the reply has stopped streaming and is shown as stored within 1 s
    # (the model would have gone on for a minute).
    page.wait_for_function(STOPPED, timeout=1_000)

    reply = stored_reply(session)
    assert reply.stopped is True
    assert reply.content.startswith(slow_model.text(2)) and reply.content != slow_model.text()
    shown = page.locator(".msg-assistant .part[data-message-id] .md").last.inner_text()
    assert shown.strip() == reply.content.strip()  # what the page shows is what is kept
    assert page.locator(".stopped-note").inner_text() == "Stopped"
    assert slow_model.cut.wait(5), "the model's stream was not closed"
    # The composer is back: Send, not Stop.
    page.get_by_role("button", name="Send message").wait_for()

    # The stopped reply stays after a reload, still marked.
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.locator(".stopped-note").count() == 1


def test_escape_stops_the_reply_too(open_slow_chat, session):
    page = open_slow_chat(session)
    start_reply(page, "Another long one")
    page.keyboard.press("Escape")
    page.wait_for_function(STOPPED, timeout=1_000)
    assert stored_reply(session).stopped is True
    roles = list(session.messages.order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant"]
