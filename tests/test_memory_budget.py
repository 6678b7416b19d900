"""The memory budget never empties memory: one oversized entry is clipped in the block,
marked, and the other entries stay; model output is held to the limits user input is."""

import json

import pytest

from memory.actions.context import assemble_context
from memory.actions.summarize import do_summarize_topic
from memory.lib.limits import MAX_SUMMARY_CHARS
from memory.lib.tokens import estimate_tokens, oldest_to_drop
from memory.models import Agent, Session, Topic
from memory.stores.persistent import (
    _as_row,
    _entry,
    entry_cap,
    get_persistent_memory,
    truncate_to_budget,
)
from tests.evaluation_helpers import converse, summary_answer
from tests.memory_builders import add_topic

CUT = "characters cut]"


@pytest.fixture
def earlier(alice, agent):
    return Session.objects.start(user=alice, agent=agent)


def three_entries(earlier):
    return [
        add_topic(earlier, title=title, summary=summary, keep=True, age_days=age, messages=2)
        for age, title, summary in [
            (30, "Stack", "Django + Postgres."),
            (20, "Hosting", "Hetzner, two boxes."),
            (10, "Billing", "Stripe, monthly."),
        ]
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_7000_character_summary_edit_leaves_the_other_entries_in_the_memory_block(
    session, earlier, as_alice, agent, which
):
    topics = three_entries(earlier)
    big = topics[which]
    response = as_alice.patch(
        f"/agents-api/topics/{big.pk}",
        data=json.dumps({"summary": "Long. " + "x" * 6994}),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert len(Topic.objects.get(pk=big.pk).summary) == 7000

    block = get_persistent_memory(session=session)

    assert [entry.topic_id for entry in block.entries] == [topic.pk for topic in topics]
    assert block.dropped == ()
    assert [entry.topic_id for entry in block.clipped] == [big.pk]
    clipped = block.entries[which]
    assert clipped.summary.startswith("Long. xxx") and clipped.summary.endswith(CUT)
    assert clipped.tokens <= entry_cap(agent.memory_token_budget)
    assert sum(entry.tokens for entry in block.entries) <= block.budget
    stable = assemble_context(session=session).messages[0]["content"]
    for topic in topics:
        assert f"[#{topic.pk}] {topic.title}: " in stable
        if topic != big:
            assert f"[#{topic.pk}] {topic.title}: {topic.summary}\n" in f"{stable}\n"
    assert stable.count(CUT) == 1


def test_a_model_summary_past_the_whole_budget_leaves_four_other_entries(session, earlier, agent):
    """A summary bigger than the whole budget (as stored before model output was held to
    the limit) took 5 entries to 0; now it is clipped and the four others stay."""
    Agent.objects.filter(pk=agent.pk).update(memory_token_budget=400)
    session.agent.refresh_from_db()
    small = [
        add_topic(earlier, title=f"Topic {i}", summary=f"Decision {i}.", keep=True, age_days=i)
        for i in range(4, 0, -1)
    ]
    huge = add_topic(earlier, title="Huge", summary="y" * 10_949, keep=True, age_days=0)

    block = get_persistent_memory(session=session)

    assert [e.topic_id for e in block.entries] == [t.pk for t in [*small, huge]]
    assert block.entries[-1].summary.endswith(CUT)
    assert block.entries[-1].tokens <= 100  # a quarter of the budget
    assert estimate_tokens(block.text) < 400 + 100  # the budget plus the fixed header


def test_a_long_earlier_topic_summary_leaves_the_other_earlier_topics(session, settings):
    settings.EARLIER_TOPICS_TOKEN_BUDGET = 400
    first = add_topic(session, title="First", summary="One.")
    long = add_topic(session, title="Long", summary="z" * 7000)
    last = add_topic(session, title="Last", summary="Three.")

    stack = assemble_context(session=session)

    semi = stack.messages[1]["content"]
    assert stack.dropped_earlier_topics == ()
    assert f"[#{first.pk}] First: One." in semi and f"[#{last.pk}] Last: Three." in semi
    [line] = [line for line in semi.splitlines() if f"[#{long.pk}]" in line]
    assert line.endswith(CUT) and estimate_tokens(line) <= 100


def test_a_model_summary_longer_than_the_limit_is_clipped_to_it(fake_openai, session):
    topic = session.active_topic()
    converse(session, [("user", "Plan the garden."), ("assistant", "Tomatoes and basil.")] * 3)
    fake_openai.reply_json(summary_answer(summary="Garden. " + "w" * 10_941))

    do_summarize_topic(topic_id=topic.pk)

    topic.refresh_from_db()
    assert len(topic.summary) <= MAX_SUMMARY_CHARS
    assert topic.summary.startswith("Garden. www") and topic.summary.endswith("…")


@pytest.mark.parametrize("budget", [0, 64, 300, 2_000])
def test_the_budget_keeps_the_newest_entries_that_fit_from_entries_or_cached_rows(budget):
    """FIFO truncation, whatever the form it is given: the newest entries whose capped
    lines fit, the rest dropped oldest first; the cache's rows (what a turn passes, so the
    thousands a long-lived scope drops are never built) give the same block."""
    entries = tuple(
        _entry(pk, 1, f"Topic {pk}", "Said and decided. " * (1 + pk % 40), pk % 5 == 0, None, None)
        for pk in range(300)
    )
    rows = tuple(_as_row(entry) for entry in entries)
    capped = [entry.capped(entry_cap(budget)) for entry in entries]
    start = oldest_to_drop([entry.tokens for entry in capped], budget)

    block = truncate_to_budget(entries, budget=budget)

    assert block.entries == tuple(capped[start:])
    assert block.dropped == entries[:start]
    assert block.dropped_titles == tuple(f"Topic {pk}" for pk in range(start))
    assert truncate_to_budget(rows, budget=budget) == block
    assert 0 < start < 300 or budget in (0, 2_000)
