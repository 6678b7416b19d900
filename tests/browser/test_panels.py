"""The inspector panels in a real browser: facts to edit, notes, memory, context."""

import pytest

from memory.models import Deletion, MemoryDecision, MemoryState, Notes, Session, Topic
from memory.stores.facts import read_facts, set_fact
from tests.memory_builders import add_topic

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def test_facts_are_added_edited_and_deleted_in_the_facts_panel(open_chat, session, alice, agent):
    set_fact(user=alice, agent=agent, key="timezone", value="Europe/Lisbon", actor="user")
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
    # Said once, by the reply's memory line (issue 47), not by a tool card too.
    line = page.locator(".memory-line summary", has_text="Remembered: favourite colour = teal")
    line.wait_for()


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
    # Plain words on the page; the precise terms of docs/memory.md in their tooltips.
    for words in ["the same every turn", "who the agent is", "changes with the topic", "this turn"]:
        assert words in shown
    terms = " ".join(page.locator("#context-body [title]").evaluate_all("n => n.map(x => x.title)"))
    for term in ["Stable prefix", "SOUL identity", "Semi-stable prefix", "Volatile suffix"]:
        assert term in terms


# --- the memory panel: every entry can be steered --------------------------------------


@pytest.fixture
def remembered(session, alice, agent):
    """A promoted topic of an earlier session of alice's, as the memory panel shows it."""
    earlier = Session.objects.start(user=alice, agent=agent, title="Last week")
    topic = add_topic(earlier, title="DB choice", summary="We chose MySQL.", keep=True, messages=2)
    return topic


def memory_entry(page, topic):
    return page.locator(f'#memory-body .mem-item[data-topic-id="{topic.pk}"]')


def test_an_entry_of_another_session_is_toggled_in_the_memory_panel(open_chat, session, remembered):
    page = open_chat(session)
    entry = memory_entry(page, remembered)
    assert entry.locator(".brain").get_attribute("data-state") == "promoted"

    entry.get_by_role("button", name="Memory: DB choice").click()
    deprecated = f'#memory-body .mem-item.is-deprecated[data-topic-id="{remembered.pk}"]'
    page.locator(deprecated).wait_for()
    remembered.refresh_from_db()
    assert remembered.memory_state == MemoryState.DEPRECATED
    assert remembered.deprecated_manually_set  # the user's decision: the agent cannot undo it

    memory_entry(page, remembered).get_by_role("button", name="Memory: DB choice").click()
    memory_entry(page, remembered).wait_for(state="detached")
    remembered.refresh_from_db()
    assert remembered.memory_state == MemoryState.NONE


def test_an_entry_is_edited_in_the_memory_panel_and_the_edit_sticks(open_chat, session, remembered):
    page = open_chat(session)
    memory_entry(page, remembered).get_by_role("button", name="Edit “DB choice”").click()
    summary = page.locator("#memory-body").get_by_label("Summary", exact=True)
    summary.fill("We chose PostgreSQL; MySQL was reversed.")
    page.get_by_role("button", name="Save").click()

    memory_entry(page, remembered).locator("p", has_text="We chose PostgreSQL").wait_for()
    remembered.refresh_from_db()
    assert remembered.summary == "We chose PostgreSQL; MySQL was reversed."
    assert remembered.summary_manually_set
    assert MemoryDecision.objects.get(action="edit").user == session.user


def test_an_entry_links_to_its_topic_in_its_own_session(open_chat, session, remembered):
    page = open_chat(session)
    link = memory_entry(page, remembered).get_by_role("link", name="Open the topic “DB choice”")
    link.click()
    page.wait_for_url(f"**/sessions/{remembered.session_id}/#topic-{remembered.pk}")
    page.wait_for_selector("#conn[data-state=open]")
    page.locator("#conv-title", has_text="DB choice").wait_for()
    assert page.locator("#viewing-past").is_visible()
    page.locator(".msg-user", has_text="DB choice").first.wait_for()


def test_an_earlier_topic_is_edited_and_deleted_from_the_topic_list(open_chat, session):
    earlier = add_topic(session, title="Lunch", summary="Noodles.", messages=2)
    page = open_chat(session)
    row = page.locator(f'.topic[data-topic-id="{earlier.pk}"]')
    row.get_by_role("button", name="More about Lunch").click()
    row.get_by_role("button", name="Edit “Lunch”").click()
    row.get_by_label("Title", exact=True).fill("Lunch spots")
    row.get_by_role("button", name="Save").click()
    row.locator(".topic-title", has_text="Lunch spots").wait_for()
    earlier.refresh_from_db()
    assert (earlier.title, earlier.summary_manually_set) == ("Lunch spots", True)

    row.get_by_role("button", name="Delete “Lunch spots”").click()
    assert "cannot be undone" in row.inner_text()
    row.get_by_role("button", name="Delete permanently").click()
    row.wait_for(state="detached")
    assert not Topic.objects.filter(pk=earlier.pk).exists()
    # The active topic can be edited, never deleted (a session always has one).
    active = page.locator(f'.topic[data-topic-id="{session.active_topic().pk}"]')
    active.locator(".topic-expand").click()
    active.locator(".topic-actions").get_by_role("button", name="Edit").wait_for()
    assert active.locator(".topic-actions .btn-danger").is_hidden()


def test_a_session_is_deleted_from_the_sessions_page_after_a_confirmation(
    live, login, page, session, remembered
):
    login(session.user)
    page.set_default_timeout(10_000)
    page.goto(f"{live}/")
    page.get_by_role("link", name="Delete “Last week”").click()
    assert "permanently" in page.locator("main").inner_text()
    assert Session.objects.filter(pk=remembered.session_id).exists()  # asking deletes nothing

    page.get_by_role("button", name="Delete permanently").click()

    page.locator(".notice", has_text="was deleted permanently").wait_for()
    assert page.locator(".session-item", has_text="Last week").count() == 0
    assert not Session.objects.filter(pk=remembered.session_id).exists()
    assert Deletion.objects.get().session_ref == remembered.session_id
