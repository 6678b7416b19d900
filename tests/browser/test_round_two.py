"""What a newcomer hit (issue 24), in the browser: the offline page names its model, the
cap is shown before it matters, an export downloaded from the page re-imports with nothing
changed, a fork during a send keeps the question before its answer, and a server restart
mid-reply leaves no error toast and one bubble."""

import json

import pytest
from django.db import transaction

from memory.actions.fork import ForkPlan, do_silent_fork
from memory.lib.limits import MAX_MESSAGE_CHARS
from memory.models import FactActor, Message, Session, Topic
from memory.stores.facts import merge_facts, read_facts
from tests.browser.conftest import slow_server_env
from tests.browser.helpers import in_thread
from tests.live_server import free_port, running_server

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]

STREAMING = """() =>
    (document.querySelector('.part.is-streaming .md')?.textContent || '').length > 20"""
# Every message row of the thread, in the order shown: "user" or "assistant".
ROWS = """() => [...document.querySelectorAll('#thread .msg')].map(
    (row) => row.classList.contains('msg-user') ? 'user' : 'assistant')"""


def test_the_offline_page_names_the_model_and_says_how_to_connect_one(open_chat, session):
    page = open_chat(session)
    badge = page.locator("#model-badge")
    assert badge.inner_text().strip() == "Offline model — connect one"
    help_text = badge.locator(".model-help")
    assert not help_text.is_visible()
    badge.locator("summary").click()
    assert help_text.is_visible()
    words = help_text.inner_text()
    for needed in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "make local-model", "/remember"):
        assert needed in words


def test_the_counter_shows_before_the_cap_and_past_it_send_is_off(open_chat, session):
    page = open_chat(session)
    composer = page.get_by_label("Message Drift")
    counter = page.locator("#composer-counter")
    composer.fill("short")
    assert counter.is_hidden()

    near = int(MAX_MESSAGE_CHARS * 0.8)
    composer.fill("é" * near)  # code points, as the server counts them
    assert counter.is_visible()
    assert counter.inner_text() == f"{near:,} / {MAX_MESSAGE_CHARS:,}"
    assert page.get_by_role("button", name="Send message").is_enabled()

    composer.fill("x" * (MAX_MESSAGE_CHARS + 1))
    assert counter.inner_text() == f"1 character over the {MAX_MESSAGE_CHARS:,} limit"
    assert page.locator("#send").is_disabled()
    composer.press("Enter")  # refused in the page, with the reason; nothing is sent
    assert "longer than the" in page.locator("#composer-status").inner_text()
    assert not session.messages.exists()
    # The composer never grows over the thread.
    assert page.locator("#composer-input").bounding_box()["height"] <= 0.3 * 800 + 2


def test_an_export_downloaded_from_the_page_reimports_with_nothing_changed(
    live, login, page, session, tmp_path
):
    session.append_message(role=Message.Role.USER, content="Plan Lisbon in May 🇵🇹")
    session.append_message(role=Message.Role.ASSISTANT, content="**Alfama** first.")
    Topic.objects.filter(pk=session.active_topic().pk).update(
        title="Lisbon in May", summary="Lisbon (Alfama).", keep_in_memory=True
    )
    with transaction.atomic():
        merge_facts(
            user=session.user, agent=session.agent, facts={"city": "Lisbon"}, actor=FactActor.USER
        )

    def state():
        return (
            list(Session.objects.order_by("pk").values_list("pk", "uid", "title")),
            list(
                Topic.objects.order_by("pk").values_list(
                    "pk", "uid", "title", "summary", "keep_in_memory"
                )
            ),
            list(Message.objects.order_by("pk").values_list("pk", "seq", "role", "content")),
            read_facts(user=session.user, agent=session.agent),
        )

    before = state()
    login(session.user)
    page.set_default_timeout(10_000)
    page.goto(f"{live}/")
    page.get_by_role("link", name="Export or import your data").click()
    page.wait_for_url(f"{live}/data/")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export everything with Drift").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name.endswith(".json")
    document = json.loads(saved.read_text(encoding="utf-8"))  # a real JSON file, not a page
    assert document["facts"] == {"city": "Lisbon"}
    assert document["sessions"][0]["topics"][0]["messages"][0]["content"] == "Plan Lisbon in May 🇵🇹"

    page.get_by_label("A file exported from Driftless (.json)").set_input_files(saved)
    preview = page.locator("#import-preview")
    preview.wait_for()
    assert "1 fact, 1 session, 1 topic and 2 messages of Drift" in preview.inner_text()
    page.get_by_role("button", name="Import").click()
    result = page.locator("#import-result")
    result.wait_for()
    assert result.inner_text().startswith("Imported: nothing changed")
    assert state() == before

    # A file that is not JSON is refused in the page, before anything is sent.
    html = tmp_path / "page.json"
    html.write_text("<!doctype html><title>Api Root</title>", encoding="utf-8")
    page.get_by_label("A file exported from Driftless (.json)").set_input_files(html)
    page.locator("#import-preview.is-problem").wait_for()
    assert "is not a JSON file" in preview.inner_text()
    assert page.get_by_role("button", name="Import").is_disabled()


def test_a_fork_during_a_send_keeps_the_question_before_the_answer(open_slow_chat, session):
    session.append_message(role=Message.Role.USER, content="Where should we eat lunch?")
    session.append_message(role=Message.Role.ASSISTANT, content="The noodle place.")
    prior = session.active_topic()
    page = open_slow_chat(session)

    page.get_by_label("Message Drift").fill("Now: which database for the app?")
    page.keyboard.press("Enter")
    page.wait_for_function(STREAMING)
    question = session.messages.get(content="Now: which database for the app?")
    plan = ForkPlan(session_id=session.pk, topic_id=prior.pk, start_seq=question.seq, reason="test")
    fork = in_thread(do_silent_fork, plan=plan)
    page.locator(f'.topic[data-topic-id="{fork.topic.pk}"].is-active').wait_for()

    # While the reply still streams, in the new topic: the question, then the answer.
    page.wait_for_function(STREAMING)
    assert page.evaluate(ROWS) == ["user", "assistant"]
    assert "which database" in page.locator(".msg-user").inner_text()
    assert "noodle" not in page.locator("#thread").inner_text()
    page.keyboard.press("Escape")  # stop the long reply; it is stored in the new topic
    page.locator(".msg-assistant .part[data-message-id] .stopped-note").wait_for()
    assert page.evaluate(ROWS) == ["user", "assistant"]
    page.reload()
    page.wait_for_selector("#conn[data-state=open]")
    assert page.evaluate(ROWS) == ["user", "assistant"]
    roles = list(fork.topic.messages.order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant"]


def test_a_server_restart_mid_reply_leaves_no_error_toast_and_one_bubble(
    _allow_async_unsafe, transactional_db, slow_model, context, page, session
):
    from django.conf import settings
    from django.test import Client

    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    port = free_port()
    env = slow_server_env(slow_model)
    with running_server(env, port=port) as url:
        client = Client()
        client.force_login(session.user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": url}])
        page.set_default_timeout(15_000)
        page.goto(f"{url}/sessions/{session.pk}/")
        page.wait_for_selector("#conn[data-state=open]")
        page.evaluate(
            """() => new MutationObserver(() => {
                 const t = document.getElementById('toast');
                 if (!t.hidden) window.__toasts = [...(window.__toasts || []), t.innerText];
               }).observe(document.getElementById('toast'),
                          {attributes: true, childList: true, subtree: true})"""
        )
        page.get_by_label("Message Drift").fill("Tell me a long story")
        page.keyboard.press("Enter")
        page.wait_for_function(STREAMING)
    # Stopped (SIGTERM: the turn in flight is marked interrupted after the drain); the
    # same address serves again.
    with running_server(env, port=port):
        page.wait_for_selector("#conn[data-state=open]", timeout=30_000)
        page.locator(".failure").wait_for()
        page.wait_for_timeout(1_000)  # anything the resync would still show
        toasts = page.evaluate("window.__toasts || []")
        assert not [t for t in toasts if "Could not" in t or "Cannot read" in t], toasts
        assert errors == []
        assert page.locator(".msg-user").count() == 1
        assert page.locator("#thread .msg-assistant").count() <= 1  # never two bubbles
        assert "interrupted" in page.locator(".failure").inner_text()
        assert page.locator(".failure").get_by_role("button", name="Retry").is_visible()


def test_one_click_too_many_on_a_brain_offers_undo(open_chat, session):
    session.append_message(role=Message.Role.USER, content="Lisbon or Porto in May?")
    session.append_message(role=Message.Role.ASSISTANT, content="Lisbon, then Porto by train.")
    topic = session.active_topic()
    Topic.objects.filter(pk=topic.pk).update(title="Trip planning", summary="Lisbon, then Porto.")
    page = open_chat(session)
    brain = page.locator(f'.topic[data-topic-id="{topic.pk}"] .brain')

    with page.expect_response(lambda r: r.url.endswith(f"/topics/{topic.pk}/memory")):
        brain.click()  # gray → teal: no toast
    page.wait_for_function("() => !document.querySelector('.brain[aria-busy]')")
    assert page.locator("#toast").is_hidden(), page.locator("#toast").inner_text()
    with page.expect_response(lambda r: r.url.endswith(f"/topics/{topic.pk}/memory")):
        brain.click()  # teal → red: said, with Undo
    toast = page.locator("#toast")
    toast.wait_for()
    assert "no longer true" in toast.inner_text()
    topic.refresh_from_db()
    assert topic.memory_state == "deprecated"

    with page.expect_response(lambda r: r.url.endswith(f"/topics/{topic.pk}/memory")):
        toast.get_by_role("button", name="Undo").click()
    page.wait_for_function(
        "id => document.querySelector(`.topic[data-topic-id='${id}'] .brain`)"
        ".dataset.state === 'promoted'",
        arg=topic.pk,
    )
    topic.refresh_from_db()
    assert topic.memory_state == "promoted"


CONTRAST = """() => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const channel = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (node) => {
    for (; node; node = node.parentElement) {
      const c = rgb(getComputedStyle(node).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const node of document.querySelectorAll('body *')) {
    const own = [...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
    const style = getComputedStyle(node);
    if (!own || !node.checkVisibility() || parseFloat(style.fontSize) >= 18) continue;
    if (node.closest('[disabled], .hl, pre, code, mark, .brain-legend .brain')) continue;
    const fg = lum(rgb(style.color)), bg = lum(background(node));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const text = node.textContent.trim().slice(0, 30);
    if (ratio < 4.5) low.push(node.className + ' ' + ratio.toFixed(2) + ' ' + text);
  }
  return low;
}"""


def test_small_text_has_a_contrast_of_at_least_4_5_to_1(open_chat, session, alice, agent):
    other = Session.objects.start(user=alice, agent=agent, title="Lisbon trip")
    other.append_message(role=Message.Role.USER, content="Trains or flights?")
    session.append_message(role=Message.Role.USER, content="Which database?")
    session.append_message(role=Message.Role.ASSISTANT, content="PostgreSQL.")
    page = open_chat(session)
    page.locator(".msg-assistant").hover()
    assert page.evaluate(CONTRAST) == []
