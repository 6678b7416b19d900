"""What a newcomer meets in the chat page: the sessions beside the chat, Back that shows the
truth, commands and tools said in sentences, long threads, tables, and the brain legend."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from chat.api.serializers import MESSAGE_PAGE_SIZE
from memory.models import Message, Session, Topic
from memory.stores.facts import read_facts
from tests.browser.test_chat import wait_for_reply

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def send(page, text: str, *, replies: int) -> None:
    page.get_by_label("Message Drift").fill(text)
    page.keyboard.press("Enter")
    wait_for_reply(page, replies)


def session_row(page, session):
    return page.locator(f'.session-item[data-session-id="{session.pk}"]')


def session_link(page, session):
    return session_row(page, session).locator("a.session-link")


def test_the_sidebar_lists_creates_renames_deletes_and_switches_sessions(
    open_chat, live, alice, bob, agent
):
    older = Session.objects.start(user=alice, agent=agent, title="Lisbon trip")
    Session.objects.filter(pk=older.pk).update(updated_at=timezone.now() - timedelta(days=2))
    current = Session.objects.start(user=alice, agent=agent)
    Topic.objects.filter(pk=current.active_topic().pk).update(title="Database choice")
    Session.objects.start(user=bob, agent=agent, title="Bob's secret project")
    page = open_chat(current)

    # Lists: mine only, newest first, the current one marked, titles people can read.
    rows = page.locator(".session-item")
    assert rows.count() == 2
    assert [int(i) for i in rows.evaluate_all("r => r.map(x => x.dataset.sessionId)")] == [
        current.pk,
        older.pk,
    ]
    assert session_link(page, current).get_attribute("aria-current") == "page"
    assert session_row(page, current).locator(".session-title").inner_text() == "Database choice"
    assert "2 days ago" in session_row(page, older).inner_text()
    assert "Bob" not in page.locator("#session-list").inner_text()

    # Renames, with the keyboard: the Rename button, type, Enter.
    session_row(page, older).get_by_role("button", name="Rename “Lisbon trip”").focus()
    page.keyboard.press("Enter")
    field = page.get_by_label("New title for “Lisbon trip” (empty: automatic)")
    field.fill("Lisbon, May")
    with page.expect_response(lambda r: r.url.endswith(f"/sessions/{older.pk}/")) as saved:
        page.keyboard.press("Enter")
    assert saved.value.status == 200
    # The page updates its row once it has read the answer: wait for it.
    expect(session_row(page, older).locator(".session-title")).to_have_text("Lisbon, May")
    older.refresh_from_db()
    assert older.title == "Lisbon, May"
    assert page.evaluate("document.activeElement.classList.contains('session-rename')")
    # Escape cancels.
    page.keyboard.press("Enter")
    page.keyboard.type("never saved")
    page.keyboard.press("Escape")
    older.refresh_from_db()
    assert older.title == "Lisbon, May"
    assert session_row(page, older).locator(".session-title").inner_text() == "Lisbon, May"

    # Renaming the current session names the page too.
    session_row(page, current).locator(".session-rename").click()
    page.keyboard.type("Postgres or not")
    page.keyboard.press("Enter")
    page.locator("#session-name", has_text="Postgres or not").wait_for()

    # Switches.
    session_link(page, older).click()
    page.wait_for_url(f"**/sessions/{older.pk}/")
    page.wait_for_selector("#conn[data-state=open]")
    assert session_link(page, older).get_attribute("aria-current") == "page"

    # Deletes, after the confirmation page, from the list beside the chat.
    doomed = Session.objects.start(user=alice, agent=agent, title="Throwaway")
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    session_row(page, doomed).get_by_role("link", name="Delete “Throwaway”").click()
    page.wait_for_url(f"**/sessions/{doomed.pk}/delete/")
    page.get_by_role("button", name="Delete permanently").click()
    page.wait_for_url(f"{live}/")
    assert not Session.objects.filter(pk=doomed.pk).exists()
    page.goto(f"{live}/sessions/{older.pk}/")
    page.wait_for_selector("#conn[data-state=open]")
    assert session_row(page, doomed).count() == 0

    # Creates: New chat starts a session with the same agent and lists it first.
    page.get_by_role("button", name="New chat").click()
    page.wait_for_selector("#conn[data-state=open]")
    new = Session.objects.filter(user=alice).order_by("-pk").first()
    assert new.pk not in (older.pk, current.pk) and new.agent == agent
    assert page.url.endswith(f"/sessions/{new.pk}/")
    first = page.locator(".session-item").first
    assert int(first.get_attribute("data-session-id")) == new.pk
    assert page.locator(".session-item").count() == 3


def test_a_long_session_list_opens_scrolled_to_the_current_session(open_chat, alice, agent):
    current = Session.objects.start(user=alice, agent=agent, title="The one I am in")
    Session.objects.filter(pk=current.pk).update(updated_at=timezone.now() - timedelta(days=30))
    for n in range(25):
        Session.objects.start(user=alice, agent=agent, title=f"Newer session {n}")
    page = open_chat(current)
    row = session_row(page, current)
    assert row.evaluate(
        "li => { const box = li.closest('.session-nav').getBoundingClientRect();"
        " const r = li.getBoundingClientRect();"
        " return r.top >= box.top && r.bottom <= box.bottom; }"
    )


def test_the_sidebar_follows_sessions_started_elsewhere_when_the_tab_comes_back(
    open_chat, alice, agent, session
):
    page = open_chat(session)
    assert page.locator(".session-item").count() == 1
    elsewhere = Session.objects.start(user=alice, agent=agent, title="Started in another tab")
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    session_row(page, elsewhere).wait_for()
    # A message of this session moves it back to the top.
    send(page, "hello", replies=1)
    expect(page.locator(".session-item").first).to_have_attribute(
        "data-session-id", str(session.pk)
    )


def test_back_after_sending_shows_the_messages(open_chat, live, session):
    page = open_chat(session)
    send(page, "first message", replies=1)
    send(page, "second message", replies=2)
    page.locator(".brand").click()
    page.wait_for_url(f"{live}/")

    page.go_back()
    page.wait_for_selector("#conn[data-state=open]")
    page.locator(".msg-user", has_text="second message").wait_for()
    assert page.locator(".msg-user").count() == 2
    assert page.locator(".msg-assistant .part[data-message-id]").count() == 2


def test_a_page_shown_from_the_back_forward_cache_reads_its_state_again(open_chat, session):
    """The pageshow handler itself: a persisted show re-reads what changed meanwhile."""
    page = open_chat(session)
    session.append_message(role=Message.Role.USER, content="written while the page was away")
    page.evaluate("window.dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true}))")
    page.locator(".msg-user", has_text="written while the page was away").wait_for()


def test_offline_commands_answer_in_sentences(open_chat, session):
    page = open_chat(session)

    send(page, "/remember favourite colour = teal", replies=1)
    # Said once (issue 47): by the reply's memory line, not by a tool card and the reply both.
    line = page.locator(".msg-assistant .memory-line").last
    assert "Remembered: favourite colour = teal" in line.locator("summary").inner_text()
    assert page.locator("#thread").inner_text().count("Remembered: favourite colour") == 1
    assert page.locator("#thread .tool").count() == 0

    send(page, "/forget x", replies=2)
    assert page.locator(".msg-assistant .md").last.inner_text() == "Nothing stored under 'x'"
    assert page.locator("#thread").inner_text().count("Nothing stored under 'x'") == 1
    thread = page.locator("#thread").inner_text()
    assert "Done" not in thread and "important_info" not in thread and '{"ok"' not in thread
    assert read_facts(user=session.user, agent=session.agent) == {"favourite colour": "teal"}


def test_load_earlier_brings_the_201st_from_last_message(open_chat, session):
    total = MESSAGE_PAGE_SIZE + 30
    for n in range(1, total + 1):
        session.append_message(role=Message.Role.USER, content=f"message number {n}")
    page = open_chat(session)
    assert page.locator(".msg-user").count() == MESSAGE_PAGE_SIZE
    target = f"message number {total - MESSAGE_PAGE_SIZE}"  # the 201st from the last
    assert page.locator(".msg-user", has_text=target).count() == 0

    page.get_by_role("button", name="Load earlier messages").click()

    page.locator(".msg-user .bubble", has_text=target).first.wait_for()
    assert page.locator(".msg-user").count() == total
    assert page.locator(".msg-user .bubble").first.inner_text() == "message number 1"
    # Nothing older: the button is gone, and the topic's earlier-topic link is back.
    assert page.get_by_role("button", name="Load earlier messages").count() == 0


MARKDOWN_TABLE = (
    "Here is the plan:\n\n"
    "| Day | City | Note |\n"
    "|:----|:----:|-----:|\n"
    "| 1 | **Lisbon** | <script>window.__xss = 1</script> |\n"
    '| 2 | Porto | <img src=x onerror="window.__xss = 2"> a \\| b |\n\n'
    "Enjoy."
)


def test_a_markdown_table_renders_and_a_script_in_a_cell_does_not_run(open_chat, session):
    session.append_message(role=Message.Role.USER, content="A table please")
    session.append_message(role=Message.Role.ASSISTANT, content=MARKDOWN_TABLE)
    page = open_chat(session)

    table = page.locator(".msg-assistant .md table")
    table.wait_for()
    assert table.locator("th").all_inner_texts() == ["Day", "City", "Note"]
    assert table.locator("tbody tr").count() == 2
    assert table.locator("tbody tr").first.locator("strong").inner_text() == "Lisbon"
    assert "<script>window.__xss = 1</script>" in table.inner_text()
    assert table.locator("tbody tr").nth(1).locator("td").last.inner_text().endswith("a | b")
    assert page.locator("#thread script, #thread img").count() == 0
    assert page.evaluate("window.__xss") is None
    assert table.locator("th").last.get_attribute("class") == "align-right"


def test_the_brain_legend_teaches_the_three_states_then_stays_one_click_away(open_chat, session):
    Topic.objects.filter(pk=session.active_topic().pk).update(title="Trip planning")
    page = open_chat(session)
    legend = page.locator("#brain-legend")
    assert legend.is_visible()
    text = legend.inner_text()
    for words in ["Gray", "not in memory", "Teal", "every session", "Red", "reversed"]:
        assert words in text

    with page.expect_response(lambda response: "/preferences" in response.url):
        page.get_by_role("button", name="Got it").click()  # kept for the user (issue 47)
    assert not legend.is_visible()
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert not legend.is_visible()
    page.get_by_role("button", name="What the brain colours mean").click()
    assert legend.is_visible()

    # On keyboard focus (and hover), the brain says its state in a visible label.
    tip = page.locator(".topic .brain-tip")
    assert not tip.is_visible()
    page.locator(".topic .brain").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    assert tip.is_visible()
    assert tip.inner_text().startswith("Not in memory")
    page.locator(".topic-open").hover()
    page.locator(".topic .brain").hover()
    assert tip.is_visible()


@pytest.mark.parametrize("model", ["topic", "session", "message"])
def test_admin_lists_read_well_at_1280_px(live, login, page, alice, agent, model):
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser("root", password="pw-root")
    title = "Deploy on Heroku or Fly.io: costs, regions and the migration plan"
    for n in range(3):
        session = Session.objects.start(user=alice, agent=agent, title=f"Planning session {n}")
        Topic.objects.filter(pk=session.active_topic().pk).update(title=title)
        session.append_message(role=Message.Role.USER, content="hello " * 30)
    login(admin_user)
    page.set_viewport_size({"width": 1280, "height": 800})
    response = page.goto(f"{live}/admin/memory/{model}/")
    assert response.status == 200, page.content()[:2000]

    first_row = page.locator("#result_list tbody tr").first
    # No column is cut: the table fits its box, the date column included.
    fits = page.evaluate(
        "() => { const box = document.querySelector('#changelist .results');"
        " return box.scrollWidth <= box.clientWidth; }"
    )
    assert fits, "the list is wider than its box at 1280 px"
    date = first_row.locator("td.field-created_at, td.field-updated_at").first
    assert date.evaluate("td => getComputedStyle(td).whiteSpace") == "nowrap"
    if model == "topic":
        cell = first_row.locator(".field-__str__")
        words = cell.inner_text().split()
        lines = cell.evaluate(
            "td => { const r = document.createRange(); r.selectNodeContents(td);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }"
        )
        assert lines <= len(words) // 3, f"{lines} lines for {len(words)} words"
