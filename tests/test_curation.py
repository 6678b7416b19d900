"""The tri-state curation model and the user-decision guard."""

import pytest
from django.core.cache import cache

from memory.actions.curation import (
    NEXT_USER_STATE,
    CurationRefused,
    do_agent_curation,
    do_user_curation,
)
from memory.lib.errors import DEPRECATED_GUARD_ERROR, KEEP_IN_MEMORY_GUARD_ERROR
from memory.models import MemoryDecision, MemoryState
from memory.stores.memory_states import apply_summarizer_flag
from memory.stores.persistent import memory_cache_key
from tests.memory_builders import add_messages


@pytest.fixture
def topic(session):
    topic = session.active_topic()
    topic.title = "Ledger database"
    topic.summary = "Ledger on PostgreSQL."
    topic.save()
    add_messages(session, 2)  # only a topic with messages may enter memory
    return topic


def refreshed(topic):
    topic.refresh_from_db()
    return topic


def test_a_user_click_cycles_gray_teal_red_gray_and_sets_the_manual_flags(topic, alice):
    seen = []
    for _ in range(3):
        state = NEXT_USER_STATE[refreshed(topic).memory_state]
        do_user_curation(topic=topic, state=state, user=alice)
        seen.append(refreshed(topic).memory_state)
    assert seen == [MemoryState.PROMOTED, MemoryState.DEPRECATED, MemoryState.NONE]
    assert topic.keep_in_memory_manually_set and topic.deprecated_manually_set
    trail = list(
        MemoryDecision.objects.order_by("pk").values_list("actor", "from_state", "to_state")
    )
    assert trail == [
        ("user", "none", "promoted"),
        ("user", "promoted", "deprecated"),
        ("user", "deprecated", "none"),
    ]


@pytest.mark.parametrize("action", ["promote", "demote"])
def test_it_refuses_agent_promote_and_demote_after_user_choice(topic, alice, action):
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    with pytest.raises(CurationRefused) as refused:
        do_agent_curation(topic=topic, action=action)
    assert str(refused.value) == KEEP_IN_MEMORY_GUARD_ERROR
    assert refreshed(topic).memory_state == MemoryState.PROMOTED


def test_the_guard_text_is_the_spec_text():
    assert KEEP_IN_MEMORY_GUARD_ERROR == (
        "keepInMemory was set manually by the user; the agent cannot override it."
    )


def test_it_refuses_agent_deprecate_after_user_deprecation_choice(topic, alice):
    do_user_curation(topic=topic, state=MemoryState.DEPRECATED, user=alice)
    do_user_curation(topic=topic, state=MemoryState.NONE, user=alice)  # un-deprecated by user
    with pytest.raises(CurationRefused) as refused:
        do_agent_curation(topic=topic, action="deprecate")
    assert str(refused.value) == DEPRECATED_GUARD_ERROR
    assert refreshed(topic).memory_state == MemoryState.NONE


def test_the_agent_curates_freely_until_the_user_takes_a_position(topic):
    do_agent_curation(topic=topic, action="promote")
    assert refreshed(topic).memory_state == MemoryState.PROMOTED
    do_agent_curation(topic=topic, action="demote")
    assert refreshed(topic).memory_state == MemoryState.NONE
    do_agent_curation(topic=topic, action="deprecate")
    assert refreshed(topic).memory_state == MemoryState.DEPRECATED
    assert not topic.keep_in_memory_manually_set and not topic.deprecated_manually_set
    assert MemoryDecision.objects.filter(actor="agent").count() == 3


@pytest.mark.parametrize("action", ["promote", "demote", "undeprecate", "restore"])
def test_the_agent_can_never_undeprecate(topic, action):
    do_agent_curation(topic=topic, action="deprecate")
    with pytest.raises(CurationRefused):
        do_agent_curation(topic=topic, action=action)
    assert refreshed(topic).memory_state == MemoryState.DEPRECATED


def test_the_summarizer_never_overrides_the_user(topic, alice):
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    assert apply_summarizer_flag(topic=refreshed(topic), keep_in_memory=False) is None
    assert refreshed(topic).keep_in_memory is True


def test_the_summarizer_promotes_with_an_audit_row(topic):
    decision = apply_summarizer_flag(topic=topic, keep_in_memory=True)
    assert decision.actor == "summarizer" and decision.to_state == "promoted"
    assert refreshed(topic).memory_changed_at is not None


def test_an_accepted_change_invalidates_the_scope_cache(topic, alice):
    key = memory_cache_key(topic.session.memory_scope_key)
    cache.set(key, "stale block")
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    assert cache.get(key) is None


def test_a_refused_change_leaves_the_cache_and_the_trail_alone(topic, alice):
    do_user_curation(topic=topic, state=MemoryState.PROMOTED, user=alice)
    key = memory_cache_key(topic.session.memory_scope_key)
    cache.set(key, "block")
    with pytest.raises(CurationRefused):
        do_agent_curation(topic=topic, action="demote")
    assert cache.get(key) == "block"
    assert MemoryDecision.objects.count() == 1
