"""The chat, round three (issue 47), in the browser: the memory line under a reply (what its
request carried, what its turn stored, with Undo; the same after a reload), Regenerate on a
reply stopped before its first word, and Markdown rendered while the reply streams."""

import pytest

from memory.models import FactActor, Message, Session
from memory.stores.facts import read_facts, set_fact
from tests.browser.test_chat import wait_for_reply
from tests.memory_builders import add_topic

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def send(page, text: str) -> None:
    page.get_by_label("Message Drift").fill(text)
    page.keyboard.press("Enter")


def test_the_memory_line_lists_the_promoted_topic_and_the_fact_and_survives_a_reload(
    open_chat, session, alice, agent
):
    earlier = Session.objects.start(user=alice, agent=agent, title="Last spring")
    kyoto = add_topic(earlier, title="Kyoto trip", summary="Kyoto in April.", keep=True, messages=2)
    set_fact(user=alice, agent=agent, key="passport", value="expires in May", actor=FactActor.USER)
    page = open_chat(session)

    send(page, "What should I pack?")
    wait_for_reply(page)

    def check_line():
        line = page.locator(".msg-assistant .memory-line").last
        assert "1 memory entry, 1 fact" in line.locator("summary").inner_text()
        line.locator("summary").click()
        topic = line.get_by_role("link", name="“Kyoto trip”")
        assert topic.get_attribute("href").endswith(f"/sessions/{earlier.pk}/#topic-{kyoto.pk}")
        assert line.get_by_role("button", name="passport").is_visible()

    check_line()
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    check_line()
    # The fact's link opens the Facts panel.
    page.locator(".memory-line").last.get_by_role("button", name="passport").click()
    page.locator("#panel-facts .fact-key", has_text="passport").wait_for()


def test_what_a_turn_remembered_is_said_once_and_undone_in_one_click(open_chat, session, alice):
    page = open_chat(session)

    send(page, "/remember passport = expires in May")
    wait_for_reply(page)

    thread = page.locator("#thread")
    assert thread.inner_text().count("Remembered: passport = expires in May") == 1
    assert page.locator("#thread .tool").count() == 0  # not the tool chip and the reply both
    line = page.locator(".msg-assistant .memory-line").last
    line.locator("summary").click()
    line.get_by_role("button", name="Undo: Remembered: passport = expires in May").click()
    line.get_by_text("Undone").wait_for()
    assert read_facts(user=alice, agent=session.agent) == {}
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.locator("#thread").inner_text().count("Remembered: passport") == 1


def test_a_reply_stopped_before_its_first_word_can_be_regenerated_after_a_reload(
    open_chat, session
):
    session.append_message(role=Message.Role.USER, content="Plan my balcony garden")
    session.append_message(role=Message.Role.ASSISTANT, content="", stopped=True)
    page = open_chat(session)
    assert page.locator(".stopped-note").inner_text() == "Stopped before the reply began"

    page.locator(".msg-assistant").hover()
    page.get_by_role("button", name="Regenerate the reply").click()
    page.wait_for_function("() => !document.querySelector('.stopped-note')")
    wait_for_reply(page)

    reply = session.messages.filter(role=Message.Role.ASSISTANT).get()
    assert reply.content.startswith("Offline mode") and not reply.stopped
    assert page.locator(".msg-user").count() == 1


BOLD_WHILE_STREAMING = """() => {
    const part = document.querySelector('.part.is-streaming .md');
    const strong = part && part.querySelector('strong');
    return strong && strong.textContent === 'bold' && !part.textContent.includes('**');
}"""


def test_a_bold_word_is_bold_while_the_reply_still_streams(open_slow_chat, session, slow_model):
    slow_model.TEXT = ["Here", "is", "**bold**", "text", "and", "`code`", "that", "streams"]
    try:
        page = open_slow_chat(session)
        send(page, "Say something bold")
        page.wait_for_function(BOLD_WHILE_STREAMING)
        assert page.locator(".part.is-streaming").count() == 1  # still streaming
        page.get_by_role("button", name="Stop the reply (Esc)").click()
        page.wait_for_function("() => !document.querySelector('.part.is-streaming')")
    finally:
        del slow_model.TEXT


def test_typing_while_reading_an_earlier_topic_never_lands_elsewhere_silently(open_chat, session):
    kyoto = add_topic(session, title="Kyoto in April", summary="Temples.", messages=2)
    session.append_message(role=Message.Role.USER, content="Pick a monitor")
    session.append_message(role=Message.Role.ASSISTANT, content="The 27-inch one.")
    active = session.topics.get(is_active=True)
    active.title = "Pick, monitor and ThinkPad"
    active.save(update_fields=["title"])
    page = open_chat(session)
    assert page.locator("#composer-target").is_hidden()

    page.locator(f'.topic[data-topic-id="{kyoto.pk}"] .topic-open').click()
    page.wait_for_selector("#viewing-past:not([hidden])")
    # The composer says where a message would go.
    target = page.locator("#composer-target")
    assert "“Pick, monitor and ThinkPad”" in target.inner_text()
    assert "“Kyoto in April”" in target.inner_text()

    page.get_by_role("button", name="Resume this topic").click()
    page.wait_for_selector("#viewing-past[hidden]", state="attached")
    assert target.is_hidden()
    send(page, "One more Kyoto question")
    wait_for_reply(page, 2)

    question = session.messages.get(content="One more Kyoto question")
    assert question.topic_id == kyoto.pk
    assert session.topics.get(is_active=True).pk == kyoto.pk
    assert "Kyoto in April" in page.locator("#conv-title").inner_text()
    assert page.locator(".msg-user", has_text="One more Kyoto question").count() == 1


def test_versions_of_a_reply_and_of_a_question_are_browsable_and_the_latest_is_in_context(
    open_chat, session
):
    session.append_message(role=Message.Role.USER, content="Plan my balcony garden")
    session.append_message(role=Message.Role.ASSISTANT, content="An **old** reply.")
    page = open_chat(session)

    page.locator(".msg-assistant").hover()
    page.get_by_role("button", name="Regenerate the reply").click()
    page.wait_for_function("() => !document.querySelector('.msg-assistant strong')")
    wait_for_reply(page)

    reply = page.locator(".msg-assistant .part[data-message-id]")
    pager = reply.get_by_role("group", name="Versions")
    assert pager.locator(".versions-label").inner_text() == "2/2"
    assert reply.locator(".md").inner_text().startswith("Offline mode")
    pager.get_by_role("button", name="Previous version").click()
    assert pager.locator(".versions-label").inner_text() == "1/2"
    assert reply.locator(".md strong").inner_text() == "old"
    assert pager.get_by_text("An earlier version: not in the context").is_visible()
    pager.get_by_role("button", name="Next version").click()
    assert reply.locator(".md").inner_text().startswith("Offline mode")
    # What the model saw is what the thread shows: one reply stored, the latest.
    stored = session.messages.filter(role=Message.Role.ASSISTANT).get()
    assert stored.content.startswith("Offline mode") and len(stored.versions) == 1

    # A question edited keeps its earlier version too.
    page.locator(".msg-user").hover()
    page.get_by_role("button", name="Edit and resend").click()
    page.get_by_label("Edit your message").fill("Plan my herb garden")
    page.get_by_label("Edit your message").press("Enter")
    page.locator(".msg-user .versions-label", has_text="2/2").wait_for()
    wait_for_reply(page)
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    question = page.locator(".msg-user")
    question.get_by_role("button", name="Previous version").click()
    assert question.locator(".bubble").inner_text() == "Plan my balcony garden"
    assert session.messages.filter(role=Message.Role.USER).get().content == "Plan my herb garden"


def test_got_it_is_kept_for_the_user_in_another_browser_and_the_theme_too(
    open_chat, session, alice, browser, live, login
):
    from memory.models import Preferences

    page = open_chat(session)
    assert page.locator("#brain-legend").is_visible()
    with page.expect_response(lambda response: "/preferences" in response.url):
        page.get_by_role("button", name="Got it").click()
    with page.expect_response(lambda response: "/preferences" in response.url):
        page.locator("#theme-toggle").click()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert Preferences.objects.get(user=alice).theme == "light"

    # Another browser (a fresh context: no storage of the first), the same user.
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(alice)
    other = browser.new_context()
    other.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live,
            }
        ]
    )
    second = other.new_page()
    second.goto(f"{live}/sessions/{session.pk}/")
    second.wait_for_selector("#conn[data-state=open]")
    assert not second.locator("#brain-legend").is_visible()
    assert second.evaluate("document.documentElement.dataset.theme") == "light"
    background = second.evaluate("getComputedStyle(document.body).backgroundColor")
    second.locator("#theme-toggle").click()  # light -> dark
    second.wait_for_function(
        "before => getComputedStyle(document.body).backgroundColor !== before", arg=background
    )
    other.close()


def test_keyboard_shortcuts_are_listed_and_work(open_chat, session, context, live):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live)
    session.append_message(role=Message.Role.USER, content="Which monitor?")
    session.append_message(role=Message.Role.ASSISTANT, content="The **27-inch** one.")
    page = open_chat(session)

    page.keyboard.press("Control+/")
    help_ = page.get_by_role("dialog", name="Keyboard shortcuts")
    text = help_.inner_text()
    for words in ["New topic", "Search", "Focus the message box", "Copy the last reply"]:
        assert words in text
    page.keyboard.press("Escape")
    assert not help_.is_visible()

    page.keyboard.press("Alt+Shift+C")
    page.wait_for_function(
        "async () => (await navigator.clipboard.readText()) === 'The **27-inch** one.'"
    )
    page.keyboard.press("Alt+Shift+S")
    assert page.evaluate("document.activeElement.id") == "topbar-q"
    page.keyboard.press("Shift+Escape")
    assert page.evaluate("document.activeElement.id") == "composer-input"
    before = session.topics.count()
    page.keyboard.press("Alt+Shift+N")
    page.wait_for_function("n => document.querySelectorAll('.topic').length === n", arg=before + 1)


def test_favicon_ico_is_served(live, page):
    response = page.goto(f"{live}/favicon.ico")
    assert response.status == 200 and "svg" in response.headers["content-type"]
