"""Backfill of sentence vectors (memory/actions/backfill.py): history stored before vectors
existed gets them once, in batches, and a stopped run goes on where it stopped."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.management import call_command

from memory import tasks
from memory.actions.backfill import do_backfill_vectors
from memory.models import Message, Topic
from memory.stores import vectors as vector_store
from memory.stores.vectors import messages_without_vectors, read_vectors, with_vectors
from memory.text.embeddings import dimensions, embed, from_bytes
from tests.memory_builders import add_messages, add_topic


@pytest.fixture
def history(session):
    """Two closed topics and the active one, 13 messages, none with a vector."""
    add_topic(session, title="Kyoto in April", summary="Temples and trains.", messages=4)
    add_topic(session, title="A leaking kitchen tap", messages=4)
    add_messages(session, 5)
    assert Message.objects.filter(embedding__isnull=False).count() == 0
    return session


def test_every_missing_vector_is_stored_once_and_a_second_run_finds_nothing(history):
    report = do_backfill_vectors(batch_size=3)
    assert (report.messages, report.done) == (13, True)
    assert report.topics == Topic.objects.count()
    for content, stored in Message.objects.values_list("content", "embedding"):
        assert np.allclose(from_bytes(stored), embed([content])[0], atol=1e-3)
    assert not messages_without_vectors().exists()
    again = do_backfill_vectors(batch_size=3)
    assert (again.messages, again.topics, again.done) == (0, 0, True)


def test_recall_reads_the_backfilled_vectors_without_embedding(history, monkeypatch):
    do_backfill_vectors()

    def no_embedding(texts):
        raise AssertionError(f"embedded afresh: {texts}")

    monkeypatch.setattr(vector_store, "embed", no_embedding)
    matrix = read_vectors(list(with_vectors(Message.objects.order_by("pk"))))
    assert matrix.shape == (13, dimensions())


def test_a_run_stopped_at_its_limit_is_taken_up_by_the_next(history):
    topics = Topic.objects.count()
    first = do_backfill_vectors(batch_size=2, limit=topics + 5)
    assert (first.topics, first.messages, first.done) == (topics, 5, False)
    assert messages_without_vectors().count() == 8
    rest = do_backfill_vectors(batch_size=2)
    assert (rest.topics, rest.messages, rest.done) == (0, 8, True)


def test_no_batch_embeds_more_than_its_size(history, monkeypatch):
    sizes = []

    def counted(texts):
        sizes.append(len(texts))
        return embed(texts)

    monkeypatch.setattr(vector_store, "embed", counted)
    do_backfill_vectors(batch_size=4)
    assert sizes and max(sizes) <= 4
    assert sum(sizes) == 13 + Topic.objects.count()


def test_a_topic_whose_title_changed_is_embedded_again(history):
    do_backfill_vectors()
    topic = Topic.objects.get(title="Kyoto in April")
    before = bytes(topic.embedding)
    Topic.objects.filter(pk=topic.pk).update(title="Kyoto and Nara in April")
    report = do_backfill_vectors()
    assert (report.topics, report.messages) == (1, 0)
    assert bytes(Topic.objects.get(pk=topic.pk).embedding) != before


def test_the_command_reports_what_it_stored(history, capsys):
    call_command("backfill_vectors", "--batch-size", "5")
    out = capsys.readouterr().out
    assert f"stored 13 message and {Topic.objects.count()} topic vectors (done)" in out


def test_the_task_hands_what_is_left_to_its_next_run(history, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.backfill_vectors_task, "delay", lambda *a: queued.append(a))
    result = json.loads(json.dumps(tasks.backfill_vectors_task(3, 6)))
    assert result == {"messages": 6 - Topic.objects.count(), "topics": 3, "done": False}
    assert queued == [(3, 6)]
    queued.clear()
    tasks.backfill_vectors_task(3, 100)
    assert queued == [] and not messages_without_vectors().exists()
