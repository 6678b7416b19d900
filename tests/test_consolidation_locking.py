"""Consolidation calls the model with no lock held, and re-asks when memory changed meanwhile.

The fake provider checks, from its own database connection when each request arrives,
that none of the scope's topic rows is locked (``SELECT … FOR UPDATE NOWAIT``); during
the first call the user changes an entry, so the answer prepared before the lock is stale.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction

from memory.actions.consolidation import do_consolidate
from memory.models import ConsolidationRun, Topic
from tests.memory_builders import add_topic

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _locked(topic_ids: list[int]) -> list[int]:
    found = []
    for topic_id in topic_ids:
        try:
            with transaction.atomic():
                list(Topic.objects.filter(pk=topic_id).select_for_update(nowait=True))
        except DatabaseError:
            found.append(topic_id)
    return found


def _schema(body: dict) -> str:
    return body["response_format"]["json_schema"]["name"]


def _entries(session):
    return [
        add_topic(session, title=f"Entry {i}", summary=f"Summary {i}.", keep=True, age_days=9 - i)
        for i in range(3)
    ]


def test_the_model_is_called_with_no_lock_and_a_change_during_the_call_is_asked_again(
    fake_openai, session, alice, agent
):
    first, second, third = _entries(session)
    ids = [first.pk, second.pk, third.pk]
    locked: list[list[int]] = []

    def probe(body: dict) -> None:  # every call: the subject names', then the operations'
        try:
            locked.append(_locked(ids))
            if len(locked) == 2:  # the user edits an entry while the model thinks
                Topic.objects.filter(pk=third.pk).update(summary="Summary 3, edited.")
        finally:
            connections.close_all()

    fake_openai.on_request = probe
    stale = {"op": "merge", "ids": [first.pk, second.pk], "title": "Old", "summary": "Stale."}
    fake_openai.reply_json({"operations": [stale]})
    fake_openai.reply_json({"operations": [{"op": "supersede", "old": first.pk, "new": third.pk}]})

    run = do_consolidate(agent=agent, user=alice)

    assert locked == [[], [], [], []]  # asked again: the edited entry is named again too
    assert run.status == ConsolidationRun.Status.APPLIED
    assert [op["op"] for op in run.applied] == ["supersede"]
    assert Topic.objects.get(pk=second.pk).title == "Entry 1"  # the stale merge never applied
    assert Topic.objects.get(pk=first.pk).deprecated
    assert "Summary 3, edited." in fake_openai.requests[1]["messages"][1]["content"]


def test_memory_that_keeps_changing_gives_up_changing_nothing(fake_openai, session, alice, agent):
    entries = _entries(session)
    calls = []

    def probe(body: dict) -> None:  # every call, the user edits an entry again
        try:
            if _schema(body) == "memory_consolidation":
                calls.append(body)
            Topic.objects.filter(pk=entries[0].pk).update(summary=f"Edit {len(calls)}.")
        finally:
            connections.close_all()

    fake_openai.on_request = probe
    merge = {"op": "merge", "ids": [e.pk for e in entries], "title": "All", "summary": "All."}
    for _ in range(3):
        fake_openai.reply_json({"operations": [merge]})

    run = do_consolidate(agent=agent, user=alice)

    assert run.status == ConsolidationRun.Status.STALE and run.applied == []
    assert len(calls) == 2  # STALE_ATTEMPTS
    assert [t.keep_in_memory for t in Topic.objects.filter(pk__in=[e.pk for e in entries])] == [
        True,
        True,
        True,
    ]
