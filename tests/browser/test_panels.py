"""The inspector panels in a real browser: facts to edit, notes, memory, context."""

import pytest

from memory.facts import read_facts, set_fact
from memory.models import Notes

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def test_facts_are_added_edited_and_deleted_in_the_facts_panel(open_chat, session, alice, agent):
    set_fact(user=alice, agent=agent, key="timezone", value="Europe/Lisbon")
    page = open_chat(session)
    page.get_by_role("tab", name="Facts").click()
    page.locator('.fact[data-key="timezone"]').wait_for()

    page.get_by_placeholder("Key, e.g. preferred language").fill("editor")
    page.get_by_placeholder("Value").fill("vim")
    page.get_by_role("button", name="Add fact").click()
    page.locator('.fact[data-key="editor"]').wait_for()
    assert read_facts(user=alice, agent=agent) == {"timezone": "Europe/Lisbon", "editor": "vim"}

    page.get_by_role("button", name="Edit fact editor").click()
    page.get_by_label("Value of editor").fill("helix")
    page.keyboard.press("Enter")
    page.locator('.fact[data-key="editor"] .fact-value', has_text="helix").wait_for()
    assert read_facts(user=alice, agent=agent)["editor"] == "helix"

    page.get_by_role("button", name="Delete fact timezone").click()
    page.locator('.fact[data-key="timezone"]').get_by_role("button", name="Delete").click()
    page.locator('.fact[data-key="timezone"]').wait_for(state="detached")
    assert read_facts(user=alice, agent=agent) == {"editor": "helix"}


def test_a_bad_fact_is_refused_with_the_servers_reason(open_chat, session):
    page = open_chat(session)
    page.get_by_role("tab", name="Facts").click()
    page.get_by_placeholder("Key, e.g. preferred language").fill("essay")
    page.get_by_placeholder("Value").fill("x" * 2500)
    page.get_by_role("button", name="Add fact").click()
    error = page.locator("#fact-add-error")
    error.wait_for()
    assert "longer than" in error.inner_text()


def test_a_fact_remembered_in_the_chat_appears_in_the_open_facts_panel(open_chat, session):
    page = open_chat(session)
    page.get_by_role("tab", name="Facts").click()
    page.get_by_label("Message Drift").fill("/remember favourite colour = teal")
    page.keyboard.press("Enter")
    page.locator('.fact[data-key="favourite colour"]').wait_for()
    page.locator(".tool .tool-brief", has_text="Remembered: favourite colour = teal").wait_for()


def test_the_notes_panel_shows_the_active_topics_notes_as_markdown(open_chat, session):
    Notes.objects.create(topic=session.active_topic(), content="- chose **PostgreSQL**")
    page = open_chat(session)
    page.get_by_role("tab", name="Notes").click()
    page.locator(".notes-body strong", has_text="PostgreSQL").wait_for()


def test_the_context_panel_shows_the_layers_of_the_stack(open_chat, session):
    page = open_chat(session)
    tab = page.get_by_role("tab", name="Memory")
    tab.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")  # tabs move with the arrow keys
    assert page.get_by_role("tab", name="Context").get_attribute("aria-selected") == "true"
    page.locator(".ctx-block").first.wait_for()
    shown = page.locator("#context-body").inner_text().lower()
    for name in ["stable prefix", "soul identity", "semi-stable prefix", "volatile suffix"]:
        assert name in shown
