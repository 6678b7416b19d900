"""Search in a real browser: the box in the top bar, the results, the topic it opens."""

import pytest

from memory.models import Message, Session, Topic
from tests.memory_builders import add_message

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def test_a_search_from_the_chat_page_opens_the_session_at_the_right_topic(
    open_chat, session, alice, agent
):
    earlier = Session.objects.start(user=alice, agent=agent, title="Architecture")
    decision = earlier.active_topic()
    add_message(earlier, Message.Role.USER, "Should we keep MySQL?")
    add_message(earlier, Message.Role.ASSISTANT, "We decided to move the database to PostgreSQL.")
    Topic.objects.filter(pk=decision.pk).update(title="Database decision", is_active=False)
    Topic.objects.create(session=earlier, title="Deploy plan")  # now the active topic
    add_message(earlier, Message.Role.USER, "How do we deploy on Fridays?")

    page = open_chat(session)
    page.fill("#topbar-q", "decided database")
    page.press("#topbar-q", "Enter")
    page.wait_for_url("**/search/?q=decided+database")
    hits = page.locator(".search-hit")
    assert hits.count() == 1
    assert hits.first.locator("mark").all_inner_texts() == ["decided", "database"]

    hits.first.locator("a.hit-title").click()
    page.wait_for_url(f"**/sessions/{earlier.pk}/#topic-{decision.pk}")
    page.wait_for_selector("#viewing-past:not([hidden])")
    assert page.locator("#conv-title").inner_text() == "Database decision"
    assert page.get_by_text("We decided to move the database to PostgreSQL.").is_visible()
    assert not page.get_by_text("How do we deploy on Fridays?").is_visible()
