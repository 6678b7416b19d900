"""Persistent memory: what is in the block, the FIFO budget, and the cache."""

import pytest
from django.core.cache import cache, caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import memory.stores.persistent as persistent
from memory.actions.context import assemble_context
from memory.actions.curation import do_agent_curation, do_user_curation
from memory.lib.tokens import estimate_tokens
from memory.models import Agent, MemoryState, Organization, Session, Topic
from memory.stores.persistent import (
    get_persistent_memory,
    invalidate_persistent_memory,
    invalidate_topic_memory,
    memory_cache_key,
)
from tests.conftest import make_user
from tests.memory_builders import add_topic


@pytest.fixture
def earlier(alice, agent):
    """Another, older session of alice's with the same agent."""
    return Session.objects.start(user=alice, agent=agent)


def memory_text(session):
    return get_persistent_memory(session=session).text


def test_promoted_topics_show_their_summary_and_deprecated_ones_only_their_title(session, earlier):
    stack = add_topic(earlier, title="Stack", summary="Django + Postgres.", keep=True, age_days=3)
    old = add_topic(earlier, title="Old DB", summary="We chose MySQL.", deprecated=True, age_days=2)
    add_topic(earlier, title="Chatter", summary="Small talk.")
    block = get_persistent_memory(session=session)
    today = timezone.localdate().isoformat()
    assert block.text.splitlines()[2:] == [
        f"{today} [#{stack.pk}] Stack: Django + Postgres.",
        f"{today} [#{old.pk}] [DEPRECATED] Old DB",
    ]
    assert "MySQL" not in block.text and "Small talk" not in block.text
    deprecated = block.entries[1]
    assert deprecated.deprecated and deprecated.summary == ""


def test_a_deprecated_topic_that_was_also_promoted_shows_no_summary(session, earlier, alice):
    topic = add_topic(earlier, title="Pricing", summary="Flat fee.", keep=True, messages=2)
    do_user_curation(topic=topic, state=MemoryState.DEPRECATED, user=alice)
    day = timezone.localdate().isoformat()
    assert memory_text(session).splitlines()[2:] == [f"{day} [#{topic.pk}] [DEPRECATED] Pricing"]


def test_entries_are_ordered_oldest_first_by_when_they_entered_memory(session, earlier):
    add_topic(earlier, title="Newest", summary="c", keep=True, age_days=1)
    add_topic(earlier, title="Oldest", summary="a", keep=True, age_days=30)
    add_topic(earlier, title="Middle", summary="b", keep=True, age_days=10)
    assert [e.title for e in get_persistent_memory(session=session).entries] == [
        "Oldest",
        "Middle",
        "Newest",
    ]


def test_the_budget_drops_the_oldest_entries_first_and_reports_them(session, earlier, agent):
    topics = [
        add_topic(earlier, title=title, summary="x" * 38, keep=True, age_days=age)
        for age, title in [(40, "A"), (30, "B"), (20, "C"), (10, "D")]
    ]
    day = timezone.localdate().isoformat()
    line_tokens = max(estimate_tokens(f"{day} [#{t.pk}] {t.title}: {t.summary}") for t in topics)
    Agent.objects.filter(pk=agent.pk).update(memory_token_budget=2 * line_tokens + 1)
    session.agent.refresh_from_db()
    block = get_persistent_memory(session=session)
    assert [e.title for e in block.entries] == ["C", "D"]
    assert [e.title for e in block.dropped] == ["A", "B"]
    assert sum(e.tokens for e in block.entries) <= block.budget
    assert block.tokens == estimate_tokens(block.text)
    assert assemble_context(session=session).dropped == ("A", "B")


def test_a_zero_budget_drops_everything(session, earlier, agent):
    add_topic(earlier, title="A", summary="a", keep=True)
    Agent.objects.filter(pk=agent.pk).update(memory_token_budget=0)
    session.agent.refresh_from_db()
    block = get_persistent_memory(session=session)
    assert block.text == "" and block.tokens == 0 and [e.title for e in block.dropped] == ["A"]


def test_this_sessions_own_topics_are_not_in_its_block_but_are_in_the_others(session, earlier):
    mine = add_topic(session, title="Mine", summary="Decided X.", keep=True)
    add_topic(earlier, title="Theirs", summary="Decided Y.", keep=True)
    assert [e.title for e in get_persistent_memory(session=session).entries] == ["Theirs"]
    assert [e.title for e in get_persistent_memory(session=earlier).entries] == ["Mine"]
    # ... and it appears exactly once in this session's context: as a prior topic.
    text = "\n".join(m["content"] for m in assemble_context(session=session).messages)
    assert text.count("Decided X.") == 1
    assert mine.pk not in {e.topic_id for e in get_persistent_memory(session=session).entries}


def test_the_scope_is_agent_user_and_organization(session, earlier, alice, agent, organization):
    add_topic(earlier, title="Mine", summary="yes", keep=True)
    bob = make_user("bob", organization)
    add_topic(Session.objects.start(user=bob, agent=agent), title="Bob", summary="no", keep=True)
    other_agent = Agent.objects.create(organization=organization, name="Other", soul="Other.")
    add_topic(
        Session.objects.start(user=alice, agent=other_agent),
        title="Agent2",
        summary="no",
        keep=True,
    )
    other_org = Organization.objects.create(name="Else", slug="else")
    org_agent = Agent.objects.create(organization=other_org, name="Drift", soul="Else.")
    add_topic(
        Session.objects.start(user=alice, agent=org_agent), title="Org2", summary="no", keep=True
    )
    assert [e.title for e in get_persistent_memory(session=session).entries] == ["Mine"]


# --- the cache ---------------------------------------------------------------------------


def topic_scope_queries(queries):
    """The persistent-memory query: the scope's topics in memory, in the order they
    changed (the turn's other topic reads join the session too)."""
    return [
        q["sql"]
        for q in queries
        if 'FROM "memory_topic"' in q["sql"] and '"memory_changed_at" ASC' in q["sql"]
    ]


@pytest.mark.redis
def test_an_unchanged_scope_is_served_from_the_cache_without_querying_topics(session, earlier):
    add_topic(earlier, title="Stack", summary="Django.", keep=True)
    with CaptureQueriesContext(connection) as first:
        get_persistent_memory(session=session)
    assert len(topic_scope_queries(first.captured_queries)) == 1
    with CaptureQueriesContext(connection) as second:
        block = get_persistent_memory(session=session)
    assert second.captured_queries == []
    assert "Stack: Django." in block.text
    assert "django_redis" in type(caches["default"]).__module__  # the real Redis cache


@pytest.mark.redis
def test_the_second_assembly_reads_memory_from_the_cache(session, earlier):
    add_topic(earlier, title="Stack", summary="Django.", keep=True)
    with CaptureQueriesContext(connection) as first:
        assemble_context(session=session)
    with CaptureQueriesContext(connection) as second:
        stack = assemble_context(session=session)
    assert len(topic_scope_queries(first.captured_queries)) == 1
    assert topic_scope_queries(second.captured_queries) == []
    assert len(second.captured_queries) == len(first.captured_queries) - 1
    assert "Stack: Django." in stack.messages[0]["content"]


@pytest.mark.redis
@pytest.mark.parametrize(
    "start, action, shown",
    [
        ({}, "promote", "Billing: Stripe."),
        ({"keep": True}, "demote", None),
        ({"keep": True}, "deprecate", "[DEPRECATED] Billing"),
    ],
)
def test_the_very_next_assembly_shows_a_curation_change(session, earlier, start, action, shown):
    topic = add_topic(earlier, title="Billing", summary="Stripe.", messages=2, **start)
    before = assemble_context(session=session).messages[0]["content"]
    assert cache.get(memory_cache_key(session.memory_scope_key)) is not None
    do_agent_curation(topic=topic, action=action)
    after = assemble_context(session=session).messages[0]["content"]
    assert after != before
    if shown is None:
        assert "Billing" not in after
    else:
        assert shown in after
        if action == "deprecate":
            assert "Stripe." not in after


@pytest.mark.redis
def test_a_user_undeprecation_shows_at_the_next_assembly(session, earlier, alice):
    topic = add_topic(earlier, title="Billing", summary="Stripe.", deprecated=True)
    assert "[DEPRECATED] Billing" in memory_text(session)
    do_user_curation(topic=topic, state=MemoryState.NONE, user=alice)
    assert "Billing" not in memory_text(session)


@pytest.mark.redis
def test_a_new_title_or_summary_of_a_promoted_topic_shows_at_the_next_read(session, earlier):
    topic = add_topic(earlier, title="Billing", summary="Stripe.", keep=True)
    assert "Billing: Stripe." in memory_text(session)
    Topic.objects.filter(pk=topic.pk).update(title="Payments", summary="Stripe, yearly.")
    assert "Billing: Stripe." in memory_text(session)  # cached until told
    invalidate_topic_memory(topic=topic)
    assert "Payments: Stripe, yearly." in memory_text(session)


@pytest.mark.redis
def test_a_refill_that_raced_a_change_is_never_served(session, earlier, monkeypatch):
    topic = add_topic(earlier, title="Billing", summary="Stripe.", keep=True)
    stale_rows = persistent._fetch_entries(session)

    def fetch_while_a_writer_commits(reader_session):
        # The reader fetched the old rows; a writer changes and invalidates before the
        # reader stores them in the cache.
        Topic.objects.filter(pk=topic.pk).update(keep_in_memory=False)
        invalidate_persistent_memory(reader_session.memory_scope_key)
        return stale_rows

    monkeypatch.setattr(persistent, "_fetch_entries", fetch_while_a_writer_commits)
    assert "Billing" in memory_text(session)  # that reader answers with what it read
    monkeypatch.undo()
    assert "Billing" not in memory_text(session)  # the next one does not trust it


def test_admin_edits_and_deletions_of_a_topic_in_memory_invalidate_the_scope(
    session, earlier, client, django_user_model
):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    topic = add_topic(earlier, title="Billing", summary="Stripe.", keep=True)
    assert "Billing: Stripe." in memory_text(session)
    response = client.post(
        f"/admin/memory/topic/{topic.pk}/change/",
        {
            "title": "Payments",
            "summary": "Stripe, yearly.",
            **_empty_inlines(),
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert "Payments: Stripe, yearly." in memory_text(session)
    response = client.post(f"/admin/memory/topic/{topic.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert memory_text(session) == ""


def _empty_inlines():
    data = {}
    for prefix in ("messages", "notes", "memory_decisions"):
        data.update(
            {
                f"{prefix}-TOTAL_FORMS": "0",
                f"{prefix}-INITIAL_FORMS": "0",
                f"{prefix}-MIN_NUM_FORMS": "0",
                f"{prefix}-MAX_NUM_FORMS": "1000",
            }
        )
    return data
