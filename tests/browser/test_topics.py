"""The topics sidebar in a real browser: the brain toggle and live forks."""

import pytest

from memory.actions.fork import ForkPlan, do_silent_fork
from memory.actions.topics import do_new_topic
from memory.models import Message, Session, Topic
from tests.browser.helpers import in_thread

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def brain(page, topic):
    return page.locator(f'.topic[data-topic-id="{topic.pk}"] .brain')


def test_clicking_a_brain_cycles_gray_teal_red_gray_and_each_state_sticks(open_chat, session):
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Trip planning", summary="Lisbon in May.")
    session.append_message(role=Message.Role.USER, content="Plan a trip to Lisbon in May.")
    session.append_message(role=Message.Role.ASSISTANT, content="Three days, by train.")
    page = open_chat(session)
    assert brain(page, topic).get_attribute("data-state") == "none"

    for state in ["promoted", "deprecated", "none"]:
        with page.expect_response(lambda r: r.url.endswith(f"/topics/{topic.pk}/memory")) as sent:
            brain(page, topic).click()
        assert sent.value.status == 200
        assert brain(page, topic).get_attribute("data-state") == state
        topic.refresh_from_db()
        assert topic.memory_state == state
        assert topic.keep_in_memory_manually_set
        if state != "promoted":
            assert topic.deprecated_manually_set
        page.reload()
        page.wait_for_selector("#conn[data-state=open]")
        assert brain(page, topic).get_attribute("data-state") == state

    description = page.evaluate(
        "id => document.getElementById(document.querySelector("
        "`.topic[data-topic-id='${id}'] .brain`).getAttribute('aria-describedby')).textContent",
        topic.pk,
    )
    assert description.startswith("Not in memory")


def test_a_drift_fork_on_the_server_appears_in_the_sidebar_without_a_reload(open_chat, session):
    for content in ["Where should we eat lunch?", "The noodle place.", "Now: which database?"]:
        role = Message.Role.ASSISTANT if content.endswith(".") else Message.Role.USER
        session.append_message(role=role, content=content)
    session.append_message(role=Message.Role.ASSISTANT, content="PostgreSQL.")
    prior = session.active_topic()
    page = open_chat(session)
    page.evaluate("window.__sameDocument = true")
    assert page.locator(".topic").count() == 1

    start = session.messages.get(content="Now: which database?").seq
    plan = ForkPlan(session_id=session.pk, topic_id=prior.pk, start_seq=start, reason="test")
    fork = in_thread(do_silent_fork, plan=plan)

    new_row = page.locator(f'.topic[data-topic-id="{fork.topic.pk}"]')
    new_row.wait_for()
    assert "is-active" in new_row.get_attribute("class")
    assert "is-active" not in page.locator(f'.topic[data-topic-id="{prior.pk}"]').get_attribute(
        "class"
    )
    assert page.locator(".topic").count() == 2
    assert page.evaluate("window.__sameDocument") is True
    # The thread now shows the active topic: the relocated messages only.
    page.wait_for_function("() => document.querySelectorAll('.msg').length === 2")
    assert "which database" in page.locator("#thread").inner_text()
    assert "noodle" not in page.locator("#thread").inner_text()

    # A new topic started elsewhere (another tab, the REST API) shows up too.
    started = in_thread(do_new_topic, session=Session.objects.get(pk=session.pk))
    page.locator(f'.topic[data-topic-id="{started.pk}"].is-active').wait_for()
    assert page.locator(".topic").count() == 3


def test_the_new_topic_button_starts_an_empty_active_topic(open_chat, session):
    session.append_message(role=Message.Role.USER, content="Let us talk about lunch")
    session.append_message(role=Message.Role.ASSISTANT, content="Noodles.")
    first = session.active_topic()
    page = open_chat(session)

    page.get_by_role("button", name="New topic").click()

    page.wait_for_function("() => document.querySelectorAll('.topic').length === 2")
    new = Topic.objects.get(session=session, is_active=True)
    assert new.pk != first.pk
    assert "is-active" in page.locator(f'.topic[data-topic-id="{new.pk}"]').get_attribute("class")
    assert page.locator(".msg").count() == 0
    assert "Continued from" in page.locator("#thread").inner_text()
    # The earlier topic is one click away, read-only, with a way back.
    page.locator(f'.topic[data-topic-id="{first.pk}"] .topic-open').click()
    page.locator(".msg-user", has_text="Let us talk about lunch").wait_for()
    assert page.locator("#viewing-past").is_visible()
    page.get_by_role("button", name="Back to the active topic").click()
    page.wait_for_function("() => document.querySelectorAll('.msg').length === 0")
