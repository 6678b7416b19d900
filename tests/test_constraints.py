"""The database itself refuses what would break memory's invariants."""

import pytest
from django.db import IntegrityError, transaction

from memory.models import ImportantInfo, Message, Notes, Topic

pytestmark = pytest.mark.postgres


def test_it_refuses_a_second_active_topic(session):
    with pytest.raises(IntegrityError), transaction.atomic():
        Topic.objects.create(session=session, origin=Topic.Origin.USER, is_active=True)


def test_it_allows_many_inactive_topics(session):
    Topic.objects.create(session=session, is_active=False)
    Topic.objects.create(session=session, is_active=False)
    assert session.topics.count() == 3


def test_it_refuses_a_second_active_notes_document(session):
    topic = session.active_topic()
    Notes.objects.create(topic=topic, content="first")
    with pytest.raises(IntegrityError), transaction.atomic():
        Notes.objects.create(topic=topic, content="second")


def test_it_keeps_archived_notes_beside_the_active_one(session):
    topic = session.active_topic()
    Notes.objects.create(topic=topic, content="old", archived=True)
    Notes.objects.create(topic=topic, content="old too", archived=True)
    Notes.objects.create(topic=topic, content="current")
    assert topic.notes.filter(archived=False).count() == 1


def test_it_refuses_a_second_facts_document_for_one_scope(alice, agent):
    ImportantInfo.objects.create(user=alice, agent=agent, organization=agent.organization)
    with pytest.raises(IntegrityError), transaction.atomic():
        ImportantInfo.objects.create(user=alice, agent=agent, organization=agent.organization)


def test_it_refuses_a_duplicate_sequence_number(session):
    message = session.append_message(role=Message.Role.USER, content="hello")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(
            session=session, topic=message.topic, seq=message.seq, role="user", content="again"
        )


def test_append_message_numbers_messages_in_order(session):
    seqs = [session.append_message(role="user", content=str(i)).seq for i in range(3)]
    assert seqs == [1, 2, 3]
    assert session.messages.count() == 3
    session.refresh_from_db()
    assert session.message_count == 3
