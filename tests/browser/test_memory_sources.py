"""The memory panel says why it remembers (issue 23), in the browser: a merged entry says
"merged from 2 topics", its run is undone in one click and the block is the one before;
and a topic suggested for memory shows it on its brain until the user decides."""

import pytest

from memory.actions.consolidation import do_consolidate
from memory.models import Session, Topic
from memory.stores.consolidation import Scope, scope_block
from tests.browser.helpers import in_thread
from tests.memory_builders import add_topic

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.redis]


def block(session) -> str:
    return scope_block(Scope.of_session(session), budget=session.agent.memory_token_budget)


def test_a_merged_entry_says_so_undo_restores_the_block_and_a_suggested_brain_shows_it(
    open_chat, fake_openai, session, alice, agent
):
    earlier = Session.objects.start(user=alice, agent=agent, title="Last week")
    ledger = add_topic(
        earlier, title="Ledger storage", summary="On PostgreSQL.", keep=True, age_days=9, messages=2
    )
    again = add_topic(
        earlier,
        title="Ledger database",
        summary="PostgreSQL 16.",
        keep=True,
        age_days=3,
        messages=2,
    )
    suggested = add_topic(
        session, title="Vendor prices", summary="From the price tool.", messages=2
    )
    Topic.objects.filter(pk=suggested.pk).update(memory_suggested=True)
    plain = add_topic(session, title="Lunch", summary="Noodles.", messages=2)
    before = block(session)
    fake_openai.reply_json(
        {
            "operations": [
                {
                    "op": "merge",
                    "ids": [ledger.pk, again.pk],
                    "title": "Ledger",
                    "summary": "Ledger on PostgreSQL 16.",
                }
            ]
        }
    )
    run = in_thread(do_consolidate, agent=agent, user=alice)
    assert run.status == "applied" and block(session) != before

    page = open_chat(session)
    merged = page.locator(f'#memory-body .mem-item[data-topic-id="{again.pk}"]')
    source = merged.locator(".mem-source")
    assert source.inner_text() == "merged from 2 topics: “Ledger storage” and this one"
    source.get_by_role("link", name="“Ledger storage”").wait_for()
    assert page.locator(f'#memory-body .mem-item[data-topic-id="{ledger.pk}"]').count() == 0
    item = page.locator(f"#consolidation-run-{run.pk}")
    assert "Merged “Ledger storage” into “Ledger”" in item.inner_text()

    item.get_by_role("button", name=f"Undo consolidation #{run.pk}").click()

    page.locator(f'#consolidation-run-{run.pk}[data-status="undone"]').wait_for()
    assert block(session) == before
    for topic, title in [(ledger, "Ledger storage"), (again, "Ledger database")]:
        entry = page.locator(f'#memory-body .mem-item[data-topic-id="{topic.pk}"]')
        assert entry.locator(".mem-title").inner_text().startswith(title)
        assert entry.locator(".mem-source").count() == 0
    assert page.get_by_role("button", name=f"Undo consolidation #{run.pk}").count() == 0
    # The context inspector links the same entries.
    page.locator("#tab-context").click()
    page.locator("#context-body summary", has_text="What it remembers of you").click()
    sources = page.get_by_role("list", name="Where each record comes from")
    sources.get_by_role("link", name="“Ledger storage”").wait_for()
    sources.get_by_role("link", name="“Ledger database”").wait_for()

    # The suggested topic: outlined teal until the user decides; a click promotes it.
    brain = page.locator(f'#topic-list .topic[data-topic-id="{suggested.pk}"] .brain')
    assert brain.get_attribute("data-state") == "none"
    assert brain.get_attribute("data-suggested") == ""
    assert brain.get_attribute("title") == "Suggested for memory: your choice"
    assert (
        page.locator(f"#brain-state-{suggested.pk}")
        .inner_text()
        .startswith("Suggested for memory: your choice")
    )
    outline = brain.evaluate("(b) => getComputedStyle(b).borderTopStyle")
    assert outline == "dashed"  # outlined, in the teal of memory (app.css)
    other = page.locator(f'#topic-list .topic[data-topic-id="{plain.pk}"] .brain')
    assert other.get_attribute("data-suggested") is None

    with page.expect_response(lambda response: response.request.method == "PUT"):
        brain.click()

    page.locator(
        f'#topic-list .topic[data-topic-id="{suggested.pk}"] .brain[data-state="promoted"]'
        ":not([aria-busy])"
    ).wait_for()
    assert brain.get_attribute("data-suggested") is None
    suggested.refresh_from_db()
    assert suggested.keep_in_memory and not suggested.memory_suggested
