"""The topics sidebar in a real browser: the brain toggle, live forks, and screenshots."""

import pytest

from memory.curation import do_user_curation
from memory.drift import ForkPlan, do_silent_fork
from memory.facts import set_fact
from memory.models import MemoryState, Message, Notes, Session, Topic
from memory.topics import do_start_user_topic
from tests.browser.conftest import SCREENSHOTS
from tests.browser.helpers import in_thread
from tests.memory_builders import add_messages

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
    started = in_thread(do_start_user_topic, session=Session.objects.get(pk=session.pk))
    page.locator(f'.topic[data-topic-id="{started.pk}"].is-active').wait_for()
    assert page.locator(".topic").count() == 3


def test_screenshots_of_the_chat_page_the_memory_panel_and_the_facts_panel(open_chat, alice, agent):
    """Saved to docs/screenshots/ for the README: topics in all three states."""
    earlier = Session.objects.start(user=alice, agent=agent)
    trip = earlier.active_topic()
    Topic.objects.filter(pk=trip.pk).update(
        title="Lisbon trip",
        summary="Lisbon, 12–19 May; trains only, no flights; budget €1,800; stay in Alfama.",
    )
    add_messages(earlier, 2, topic=trip, prefix="Lisbon: ")
    do_user_curation(topic=trip, state=MemoryState.PROMOTED, user=alice)

    session = Session.objects.start(user=alice, agent=agent)
    first = session.active_topic()
    topics = [
        (
            first,
            "Choosing a database",
            "PostgreSQL in production (JSONB, partial indexes); SQLite for local development.",
            MemoryState.PROMOTED,
        ),
        (None, "Weekend run", "A 10 km loop along the river on Saturday.", MemoryState.NONE),
        (
            None,
            "Deploy on Heroku",
            "Heroku dynos for the API (reversed: moving to Fly.io).",
            MemoryState.DEPRECATED,
        ),
    ]
    for topic, title, summary, state in topics:
        if topic is None:
            topic = Topic.objects.create(session=session, origin=Topic.Origin.USER)
        Topic.objects.filter(pk=topic.pk).update(
            title=title, summary=summary, is_active=False, origin=Topic.Origin.USER
        )
        topic.refresh_from_db()
        if state != MemoryState.NONE:
            add_messages(session, 2, topic=topic, prefix=f"{title}: ")  # what it remembers
            do_user_curation(topic=topic, state=state, user=alice)
    active = Topic.objects.create(
        session=session, origin=Topic.Origin.DRIFT, title="Message indexes"
    )
    session.append_message(role="user", content="Which indexes should the messages table have?")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "notes",
            "arguments": '{"operation": "$set", "content": "Indexes: (session, seq) unique"}',
        },
    }
    session.append_message(
        role="assistant",
        content="Two matter most:\n\n1. A **unique** index on `(session_id, seq)`: it keeps "
        "the order and makes appends safe.\n2. An index on `(topic_id, seq DESC)` for the "
        "trailing window.\n\n```sql\nCREATE INDEX message_topic_trailing_idx\n"
        "  ON memory_message (topic_id, seq DESC);\n```",
        tool_calls=[call],
    )
    session.append_message(
        role="tool", tool_call_id="call_1", tool_name="notes", content='{"ok": true}'
    )
    session.append_message(role="assistant", content="I noted that. Shall I draft the migration?")
    Notes.objects.create(
        topic=active, content="- Indexes: `(session, seq)` unique\n- **PostgreSQL**"
    )
    for key, value in [
        ("preferred language", "Python 3.11"),
        ("timezone", "Europe/Lisbon"),
        ("deploy target", "Fly.io, region ams"),
    ]:
        set_fact(user=alice, agent=agent, key=key, value=value)

    page = open_chat(session)
    page.locator(".mem-item").first.wait_for()
    states = page.eval_on_selector_all(".topic .brain", "nodes => nodes.map(n => n.dataset.state)")
    assert sorted(states) == ["deprecated", "none", "none", "promoted"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "chat.png")
    page.locator("#inspector").screenshot(path=SCREENSHOTS / "memory-panel.png")
    page.get_by_role("tab", name="Facts").click()
    page.locator(".fact").first.wait_for()
    assert page.locator(".fact").count() == 3
    page.locator("#inspector").screenshot(path=SCREENSHOTS / "facts-panel.png")
    for name in ["chat.png", "memory-panel.png", "facts-panel.png"]:
        assert (SCREENSHOTS / name).stat().st_size > 10_000


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
