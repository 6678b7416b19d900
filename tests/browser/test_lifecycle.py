"""Lifecycle triggers: leaving the page is coalesced into one evaluate request.

The tab is "hidden" by overriding document.visibilityState and dispatching
visibilitychange, as the browser does when the user switches tabs or minimizes.
"""

import time

import pytest

from memory.models import Message

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

FAKE_VISIBILITY = """() => {
    window.__visibility = 'visible';
    const state = {configurable: true, get: () => window.__visibility};
    const hidden = {configurable: true, get: () => window.__visibility === 'hidden'};
    Object.defineProperty(document, 'visibilityState', state);
    Object.defineProperty(document, 'hidden', hidden);
}"""
HIDE_AND_COME_BACK = """() => {
    window.__visibility = 'hidden';
    document.dispatchEvent(new Event('visibilitychange'));
    window.__visibility = 'visible';
    document.dispatchEvent(new Event('visibilitychange'));
}"""


@pytest.fixture
def evaluations(open_chat, session):
    """The chat page, and the times (monotonic) of its POSTs to the evaluate endpoint."""
    page = open_chat(session)
    page.evaluate(FAKE_VISIBILITY)
    seen: list[float] = []
    url = f"/agents-api/sessions/{session.pk}/evaluate"
    page.on(
        "request",
        lambda r: (
            seen.append(time.monotonic()) if r.method == "POST" and r.url.endswith(url) else None
        ),
    )
    return page, seen


def hide(page) -> float:
    page.evaluate(HIDE_AND_COME_BACK)
    return time.monotonic()


def test_three_hides_in_a_second_make_one_evaluation_two_seconds_after_the_last(evaluations):
    page, seen = evaluations
    hide(page)
    page.wait_for_timeout(400)
    hide(page)
    page.wait_for_timeout(400)
    last = hide(page)

    page.wait_for_timeout(1500)
    assert seen == [], "nothing is sent while the burst may go on"
    page.wait_for_timeout(1700)
    assert len(seen) == 1
    assert 1.8 <= seen[0] - last <= 2.8


def test_the_guard_waits_for_a_new_message_before_evaluating_again(evaluations, session):
    page, seen = evaluations
    hide(page)
    page.wait_for_timeout(2600)
    assert len(seen) == 1

    hide(page)  # nothing new was said: the topic is not evaluated twice
    page.wait_for_timeout(2600)
    assert len(seen) == 1

    page.get_by_label("Message Drift").fill("One more thing about the trip")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.msg-assistant .part[data-message-id]') && "
        "!document.querySelector('.working')"
    )
    assert session.messages.filter(role=Message.Role.USER).count() == 1
    last = hide(page)
    page.wait_for_timeout(2600)
    assert len(seen) == 2
    assert 1.8 <= seen[1] - last <= 2.8


def test_following_an_in_app_link_evaluates_once_right_away(evaluations, live):
    page, seen = evaluations
    with page.expect_navigation():
        page.get_by_role("link", name="Driftless").click()
    page.wait_for_timeout(500)
    assert len(seen) == 1
