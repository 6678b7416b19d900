"""The README's screenshots: a scripted scene, rendered in headless Chromium.

`make screenshots` runs this file with DRIFTLESS_SCREENSHOTS=docs/screenshots, and only
then are the pictures written there. In the test suite the same scene is rendered and
checked, and the pictures go to a temporary directory: a test run never rewrites tracked
files.
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from memory.actions.curation import do_user_curation
from memory.models import MemoryState, Notes, Session, Topic
from memory.stores.facts import set_fact
from tests.memory_builders import add_messages

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def screenshots(tmp_path) -> Path:
    target = Path(os.environ.get("DRIFTLESS_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


def build_scene(alice, agent) -> Session:
    """Sessions in the sidebar, topics in all three states, a drift fork, a tool call, a
    reply's memory line and versions."""
    carried = []
    for title, days in [("Lisbon trip", 6), ("Weekly meal plan", 3), ("Reading list", 1)]:
        earlier = Session.objects.start(user=alice, agent=agent, title=title)
        Session.objects.filter(pk=earlier.pk).update(
            updated_at=timezone.now() - timedelta(days=days)
        )
        if title == "Lisbon trip":
            trip = earlier.active_topic()
            Topic.objects.filter(pk=trip.pk).update(
                title="Lisbon trip",
                summary="Lisbon, 12–19 May; trains only, no flights; budget €1,800; Alfama.",
            )
            add_messages(earlier, 2, topic=trip, prefix="Lisbon: ")
            do_user_curation(topic=trip, state=MemoryState.PROMOTED, user=alice)
            carried.append(memory_ref(trip, "Lisbon trip"))

    session = Session.objects.start(user=alice, agent=agent, title="Messages table design")
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
            if state == MemoryState.PROMOTED:
                carried.append(memory_ref(topic, title))
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
        content="Two matter most:\n\n| index | why |\n|---|---|\n| `(session_id, seq)` "
        "**unique** | keeps the order, makes appends safe |\n| `(topic_id, seq DESC)` | the "
        "trailing window |\n\n```sql\nCREATE INDEX message_topic_trailing_idx\n"
        "  ON memory_message (topic_id, seq DESC);\n```",
        tool_calls=[call],
    )
    session.append_message(
        role="tool",
        tool_call_id="call_1",
        tool_name="notes",
        content='{"ok": true, "notes": "Indexes: (session, seq) unique"}',
    )
    carried += [{"kind": "fact", "key": key} for key in FACT_KEYS]
    carried.append({"kind": "notes", "topic_id": active.pk, "session_id": session.pk})
    session.append_message(
        role="assistant",
        content="I noted that. Shall I draft the migration?",
        memory_trace={
            "carried": carried,
            "changed": [
                {
                    "kind": "notes",
                    "action": "write",
                    "topic_id": active.pk,
                    "sentence": "Noted: Indexes: (session, seq) unique",
                }
            ],
        },
        versions=[{"content": "Noted. Do you want the migration too?", "created_at": "2026-05-02"}],
    )
    session.append_message(role="user", content="Draft the migration, in SQL.")
    session.append_message(
        role="assistant",
        content="Here is the start of it:\n\n```sql\nCREATE UNIQUE INDEX message_seq_unique\n"
        "  ON memory_message (session_id, seq);\n```\n\nThen the trailing-window index, which",
        stopped=True,
    )
    Notes.objects.create(
        topic=active, content="- Indexes: `(session, seq)` unique\n- **PostgreSQL**"
    )
    for key, value in [  # FACT_KEYS
        ("preferred language", "Python 3.11"),
        ("timezone", "Europe/Lisbon"),
        ("deploy target", "Fly.io, region ams"),
    ]:
        set_fact(user=alice, agent=agent, key=key, value=value, actor="user")
    return session


FACT_KEYS = ["deploy target", "preferred language", "timezone"]


def memory_ref(topic, title: str) -> dict:
    return {"kind": "memory", "topic_id": topic.pk, "session_id": topic.session_id, "title": title}


def test_the_readme_screenshots(open_chat, alice, agent, screenshots):
    session = build_scene(alice, agent)
    page = open_chat(session)
    page.set_viewport_size({"width": 1280, "height": 960})
    page.locator(".mem-item").first.wait_for()

    states = page.eval_on_selector_all(".topic .brain", "nodes => nodes.map(n => n.dataset.state)")
    assert sorted(states) == ["deprecated", "none", "none", "promoted"]
    assert page.locator(".session-item").count() == 4
    assert page.locator("#brain-legend").is_visible()
    assert "forked by drift" in page.locator(".topic.is-active").inner_text()
    assert page.locator(".tool summary").inner_text().startswith("Noted: Indexes")
    assert page.locator(".msg-assistant .md table").count() == 1

    # The new controls (issue 24): the model badge, Copy on each code block, a reply
    # marked stopped, and the actions of the last reply (shown on hover).
    assert page.locator("#model-badge").inner_text().strip() == "Offline model — connect one"
    assert page.locator(".code-copy").count() == 2
    assert page.locator(".stopped-note").inner_text() == "Stopped"
    page.locator(".msg-assistant").last.hover()
    assert page.get_by_role("button", name="Regenerate the reply").is_visible()
    page.screenshot(path=screenshots / "chat.png")
    page.locator("#inspector").screenshot(path=screenshots / "memory-panel.png")
    page.get_by_role("tab", name="Facts").click()
    page.locator(".fact").first.wait_for()
    assert page.locator(".fact").count() == 3
    page.locator("#inspector").screenshot(path=screenshots / "facts-panel.png")
    for name in ["chat.png", "memory-panel.png", "facts-panel.png"]:
        assert (screenshots / name).stat().st_size > 10_000


def test_the_readme_screenshot_of_a_replys_memory_and_versions(
    open_chat, alice, agent, screenshots
):
    session = build_scene(alice, agent)
    page = open_chat(session)
    page.set_viewport_size({"width": 1280, "height": 960})
    reply = page.locator(".part", has_text="I noted that. Shall I draft the migration?")
    line = reply.locator(".memory-line")
    summary = line.locator("summary").inner_text()
    assert "2 memory entries, 3 facts, this topic's notes" in summary
    assert "changed: 1" in summary  # its sentence is the tool card's, said once
    line.locator("summary").click()
    line.get_by_role("link", name="“Lisbon trip”").wait_for()
    assert reply.locator(".versions-label").inner_text() == "2/2"
    reply.scroll_into_view_if_needed()
    page.locator(".conversation").screenshot(path=screenshots / "reply-memory.png")
    assert (screenshots / "reply-memory.png").stat().st_size > 10_000


def test_the_readme_screenshots_of_stop_and_your_data(
    open_slow_chat, alice, agent, screenshots, tmp_path
):
    session = Session.objects.start(user=alice, agent=agent, title="A long answer")
    page = open_slow_chat(session)
    page.set_viewport_size({"width": 1280, "height": 720})
    page.get_by_label("Message Drift").fill("Explain every index PostgreSQL has, in depth.")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => (document.querySelector('.part.is-streaming .md')?.textContent || '').length > 120"
    )
    stop = page.get_by_role("button", name="Stop the reply (Esc)")
    assert stop.is_visible()
    page.locator(".conversation").screenshot(path=screenshots / "stop.png")
    stop.click()
    page.locator(".stopped-note").wait_for()

    exported = tmp_path / "driftless-everything.json"
    exported.write_text(
        '{"format": "driftless-memory", "version": 1, "agent": "Drift", "facts": {"a": "b"},'
        ' "sessions": [{"uid": "00000000-0000-4000-8000-000000000001", "title": "Trip",'
        ' "topics": [{"messages": [{}, {}]}]}]}',
        encoding="utf-8",
    )
    page.goto(page.url.split("/sessions/")[0] + "/data/")
    page.get_by_label("A file exported from Driftless (.json)").set_input_files(exported)
    page.locator("#import-preview").wait_for()
    page.locator(".data-page").screenshot(path=screenshots / "your-data.png")
    for name in ["stop.png", "your-data.png"]:
        assert (screenshots / name).stat().st_size > 10_000
