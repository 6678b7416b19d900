"""The actions on a message (issue 24): Regenerate replaces the last reply; Copy puts a
code block's text on the clipboard."""

import pytest

from memory.models import Message
from tests.browser.test_chat import wait_for_reply

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

CODE = "for plant in ('tomato', 'basil'):\n    water(plant)  # 生菜 🌿"


def test_regenerate_replaces_the_last_reply(open_chat, session):
    session.append_message(role=Message.Role.USER, content="Plan my balcony garden")
    old = session.append_message(role=Message.Role.ASSISTANT, content="An **old** reply.")
    page = open_chat(session)
    assert page.locator(".msg-assistant .md strong").inner_text() == "old"

    page.locator(".msg-assistant").hover()
    page.get_by_role("button", name="Regenerate the reply").click()
    page.wait_for_function(
        "() => !document.querySelector('.msg-assistant strong')"
        " && document.querySelectorAll('.msg-assistant .part[data-message-id]').length === 1"
    )
    wait_for_reply(page)

    replies = session.messages.filter(role=Message.Role.ASSISTANT)
    assert replies.count() == 1 and replies.get().pk != old.pk
    new = replies.get()
    assert new.content.startswith("Offline mode")
    assert page.locator(".msg-assistant .part[data-message-id]").count() == 1
    shown = page.locator(".msg-assistant .md").inner_text()
    assert shown.startswith("Offline mode") and "old" not in shown
    assert page.locator(".msg-user").count() == 1  # the question is not asked twice
    # The same after a reload: the thread is what is stored.
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.locator(".msg-assistant .part[data-message-id]").count() == 1
    assert "old" not in page.locator(".msg-assistant .md").inner_text()


def test_copy_puts_the_code_blocks_text_on_the_clipboard(open_chat, session, context, live):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live)
    session.append_message(role=Message.Role.USER, content="Some code please")
    session.append_message(
        role=Message.Role.ASSISTANT,
        content=f"Here:\n\n```python\n{CODE}\n```\n\nAnd a second one:\n\n```\nls -la\n```",
    )
    page = open_chat(session)

    page.get_by_role("button", name="Copy the code (python)").click()
    page.locator(".code-copy", has_text="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == CODE + "\n"

    page.locator(".code-copy").nth(1).click()
    page.wait_for_function("async () => (await navigator.clipboard.readText()) === 'ls -la\\n'")


def test_edit_and_resend_replaces_your_last_message_and_its_answer(open_chat, session):
    session.append_message(role=Message.Role.USER, content="Plan Lisbon in May")
    session.append_message(role=Message.Role.ASSISTANT, content="A **Lisbon** plan.")
    page = open_chat(session)

    page.locator(".msg-user").hover()
    page.get_by_role("button", name="Edit and resend").click()
    field = page.get_by_label("Edit your message")
    assert field.input_value() == "Plan Lisbon in May"
    field.fill("Plan Porto in May 🍷")
    field.press("Enter")
    page.wait_for_function("() => !document.querySelector('.msg-assistant strong')")
    wait_for_reply(page)

    assert page.locator(".msg-user .bubble").all_inner_texts() == ["Plan Porto in May 🍷"]
    assert page.locator(".msg-assistant .part[data-message-id]").count() == 1
    stored = list(session.messages.order_by("seq").values_list("role", "content"))
    assert stored[0] == ("user", "Plan Porto in May 🍷") and len(stored) == 2
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.locator(".msg-user .bubble").all_inner_texts() == ["Plan Porto in May 🍷"]
