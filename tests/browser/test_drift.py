"""Drift in the embedded default: the offline model answers, the model-free detector forks.

Six turns planning a trip to Japan, then six about a dripping tap, then the user leaves
the page: the sidebar shows two topics, each holding its own messages.
"""

import time

import pytest

from memory.models import Message, Topic

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

JAPAN = [
    "I'm planning a two-week trip to Japan in April. Which cities should I visit?",
    "Is the Japan Rail Pass still worth buying for Tokyo, Kyoto and Osaka?",
    "How many days should I spend in Kyoto to see the temples?",
    "Will the cherry blossoms still be out in Kyoto in mid April?",
    "Should I book ryokan stays in Kyoto or are hotels better value?",
    "What's the best way to get from Osaka to Hiroshima and Miyajima?",
]
TAP = [
    "Completely different thing: my kitchen tap keeps dripping even when it's fully closed. "
    "How do I fix it?",
    "It's a single-lever mixer tap. Do I need to replace the cartridge?",
    "How do I turn off the water under the sink before taking the tap apart?",
    "The cartridge has a brand name on it. Where can I buy a replacement?",
    "After replacing the cartridge the tap still drips a little. What now?",
    "Should I call a plumber, or is replacing the whole tap easy enough?",
]
EVALUATION_SECONDS = 20


def send(page, session, text: str, replies: int) -> None:
    """Type a message, then wait until its reply is stored and the page is idle again.

    A message sent while the server still closes the previous turn is refused as busy;
    it is typed again, as a person would.
    """
    stored = Message.objects.filter(session=session, role="user", content=text)
    deadline = time.monotonic() + 20
    while not stored.exists():
        assert time.monotonic() < deadline, f"{text!r} was never accepted"
        page.get_by_label("Message Drift").fill(text)
        page.keyboard.press("Enter")
        for _ in range(20):
            if stored.exists():
                break
            time.sleep(0.1)
    while Message.objects.filter(session=session, role="assistant").count() < replies:
        assert time.monotonic() < deadline, f"no reply to {text!r}"
        time.sleep(0.1)
    page.wait_for_function(
        "() => !document.querySelector('.working') && !document.querySelector('.is-streaming')"
    )


def wait_for(predicate, seconds: float = EVALUATION_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the evaluation did not finish in time"
        time.sleep(0.2)


def users(topic: Topic) -> list[str]:
    return list(
        topic.messages.filter(role="user").order_by("seq").values_list("content", flat=True)
    )


def test_a_switch_forks_in_the_offline_default_and_each_topic_keeps_its_messages(
    live, open_chat, session
):
    page = open_chat(session)
    for count, text in enumerate(JAPAN + TAP, start=1):
        send(page, session, text, replies=count)

    page.goto(f"{live}/")  # leaving the page: the exit evaluation runs after its debounce
    last = 2 * len(JAPAN + TAP)
    wait_for(
        lambda: Topic.objects.filter(
            session=session, is_active=True, evaluated_through_seq__gte=last
        ).exists()
    )

    japan, tap = Topic.objects.filter(session=session).order_by("pk")
    assert Topic.objects.filter(session=session).count() == 2
    assert users(japan) == JAPAN and users(tap) == TAP
    assert (japan.is_active, tap.is_active, tap.origin) == (False, True, "drift")
    assert japan.messages.count() == tap.messages.count() == 12
    # The offline model's gist (issue 24): titles a person would write, summaries that
    # name the subject, and the session keeps the first topic's name.
    for topic, subject in ((japan, "Japan"), (tap, "tap")):
        assert "different thing" not in topic.title.lower() and "…" not in topic.title
        assert subject.lower() in topic.title.lower() + topic.summary.lower()

    page = open_chat(session)
    assert page.locator("#session-name").inner_text() == japan.title
    rows = page.locator(".topic")
    assert rows.count() == 2
    assert "is-active" in page.locator(f'.topic[data-topic-id="{tap.pk}"]').get_attribute("class")
    shown = page.locator("#thread").inner_text()
    assert "kitchen tap keeps dripping" in shown and "Japan Rail Pass" not in shown

    page.locator(f'.topic[data-topic-id="{japan.pk}"] .topic-open').click()
    page.wait_for_function(
        "() => document.querySelector('#thread').innerText.includes('Japan Rail Pass')"
    )
    shown = page.locator("#thread").inner_text()
    assert "Japan Rail Pass" in shown and "kitchen tap" not in shown
