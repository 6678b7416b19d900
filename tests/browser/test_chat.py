"""The chat page in a real browser: logging in, streaming, safe rendering, the keyboard."""

import json

import pytest

from memory.models import Message, Topic

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> done'


def collect_events(page) -> list[dict]:
    """Every event the server sends over the page's websockets, in order."""
    events: list[dict] = []

    def on_socket(ws):
        ws.on("framereceived", lambda payload: events.append(json.loads(payload)))

    page.on("websocket", on_socket)
    return events


def wait_for_reply(page, count: int = 1):
    """Wait until `count` final replies are shown and the agent is idle again."""
    page.wait_for_function(
        """n => document.querySelectorAll('.msg-assistant .part[data-message-id]').length >= n
              && !document.querySelector('.working')
              && !document.querySelector('.part.is-streaming')""",
        arg=count,
    )


def test_a_user_logs_in_sends_a_message_and_sees_the_reply_stream_in(live, page, session):
    events = collect_events(page)
    page.set_default_timeout(10_000)
    page.goto(f"{live}/")
    page.wait_for_url("**/login/**")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live}/")
    page.get_by_role("link", name="New conversation Drift").click()  # not its delete link
    page.wait_for_selector("#conn[data-state=open]")

    page.get_by_label("Message Drift").fill("Hello, what can you do?")
    page.get_by_role("button", name="Send message").click()
    wait_for_reply(page)

    deltas = [e["delta"] for e in events if e["type"] == "reply.delta"]
    reply = next(
        e["message"]
        for e in events
        if e["type"] == "message.created" and e["message"]["role"] == "assistant"
    )
    # The first piece at once, the rest coalesced (the offline model streams instantly).
    assert len(deltas) >= 2, "the reply arrives in pieces"
    assert "".join(deltas) == reply["content"]
    assert "Offline mode" in reply["content"]
    shown = page.locator(".msg-assistant .md").last.inner_text()
    assert shown.startswith("Offline mode")
    assert page.locator(".msg-user .bubble").inner_text() == "Hello, what can you do?"
    stored = list(session.messages.order_by("seq").values_list("role", flat=True))
    assert stored == ["user", "assistant"]


def test_markup_in_messages_is_shown_as_text_and_never_runs(open_chat, session):
    page = open_chat(session)
    page.get_by_label("Message Drift").fill(HOSTILE)
    page.keyboard.press("Enter")
    wait_for_reply(page)
    # A model may write markup too (the offline model never repeats the user's words).
    session.append_message(role=Message.Role.ASSISTANT, content=f"You wrote: {HOSTILE}")
    page.reload()  # the same content, rendered again from the stored state
    page.wait_for_selector("#conn[data-state=open]")

    assert page.evaluate("window.__xss") is None
    assert page.locator("#thread script, #thread img").count() == 0
    assert page.locator(".msg-user .bubble").inner_text() == HOSTILE
    # Markdown rendering keeps the reply's markup as text.
    shown = page.locator(".msg-assistant .md").last.inner_text()
    assert "<script>window.__xss = 1</script>" in shown


def test_a_reply_shows_the_servers_rendering_and_its_tags_only(open_chat, session):
    """The page parses no Markdown: it shows the server's sanitized rendering
    (tests/test_markdown.py holds the renderer to its tags); hostile text stays text."""
    session.append_message(role=Message.Role.USER, content="Show me")
    session.append_message(
        role=Message.Role.ASSISTANT,
        content="**bold** [x](javascript:alert(1)) <img src=x onerror=alert(1)>\n\n"
        "- [x] done\n\n```python\nprint('hi')\n```",
    )
    page = open_chat(session)
    reply = page.locator(".msg-assistant .md").last
    assert reply.locator("strong").inner_text() == "bold"
    assert reply.locator("a").count() == 0  # no link for a javascript: address
    assert reply.locator("input[type=checkbox][disabled]").count() == 1
    assert reply.locator("pre code .hl-nb").inner_text() == "print"
    assert page.locator("#thread img, #thread script").count() == 0


def test_a_reply_of_eight_thousand_nested_quotes_is_shown_as_text_and_the_page_works(
    open_chat, session
):
    """Issue 20: this once overflowed the page's recursive renderer, so later messages
    never rendered and the socket never connected."""
    deep = ">" * 8000 + " the bottom of the well"
    session.append_message(role=Message.Role.USER, content="Quote it all")
    session.append_message(role=Message.Role.ASSISTANT, content=deep)
    session.append_message(role=Message.Role.ASSISTANT, content="A **later** reply.")
    page = open_chat(session)  # waits for the socket: it connected

    replies = page.locator(".msg-assistant .md")
    # The text itself, whole and in order: past the renderer's work budget the rest is
    # shown as plain text after the formatted head (memory/text/markdown.py), so the one
    # line may break where the head ends.
    assert "".join(replies.first.inner_text().split()) == "".join(deep.split())
    assert replies.first.locator("blockquote").count() == 0
    assert replies.last.locator("strong").inner_text() == "later"
    page.get_by_label("Message Drift").fill("Still there?")
    page.keyboard.press("Enter")
    wait_for_reply(page, count=3)
    assert page.locator(".msg-user .bubble").last.inner_text() == "Still there?"


def test_the_keyboard_alone_sends_a_message_and_cycles_a_brain(open_chat, session):
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Keyboard topic")
    page = open_chat(session)

    # The composer has the focus on arrival; Shift+Enter is a new line, Enter sends.
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    page.keyboard.press("Enter")
    wait_for_reply(page)
    assert session.messages.filter(role=Message.Role.USER).get().content == "line one\nline two"

    for _ in range(30):
        page.keyboard.press("Shift+Tab")
        if page.evaluate("document.activeElement.classList.contains('brain')"):
            break
    else:
        pytest.fail("Shift+Tab never reached a brain toggle")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == (
        "Memory: Keyboard topic"
    )

    for key, state in [("Enter", "promoted"), ("Space", "deprecated"), ("Enter", "none")]:
        with page.expect_response(lambda r: r.url.endswith(f"/topics/{topic.pk}/memory")):
            page.keyboard.press(key)
        page.wait_for_function("s => document.activeElement.dataset.state === s", arg=state)
        page.wait_for_function("() => !document.activeElement.hasAttribute('aria-busy')")
        topic.refresh_from_db()
        assert topic.memory_state == state


def test_the_chat_page_adds_no_global_of_its_own(open_chat, session, browser, live):
    """ES modules with explicit imports: nothing of the app's hangs on window (compared
    with a page of the same origin that runs no script: the login page, logged out)."""
    page = open_chat(session)
    page.locator(".empty-thread").wait_for()
    on_the_page = set(page.evaluate("Object.keys(window)"))
    stranger = browser.new_context()
    plain = stranger.new_page()
    plain.goto(f"{live}/login/")
    builtin = set(plain.evaluate("Object.keys(window)"))
    stranger.close()
    assert on_the_page - builtin == set()
