"""What a returning user's turn sends to the database: SQL statements counted as the
chat-load bench counts them (bench/counting.py: every statement, not the transactions'
BEGIN and COMMIT), for a user whose earlier chats recall finds passages in."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.actions.turn import do_send_message
from memory.models import Message, Session, Topic
from memory.stores.recall import ranking
from memory.stores.recall.vectors import vector_messages
from tests.test_recall import KYOTO, past_topic

# The turn's leases (one statement to take, one to give back), the question stored (the
# session's count, the INSERT that reads the active topic), the context (the session's
# topics with its drift result, the window, recall's timeout and its five reads (the
# messages recall by meaning finds come with its ranking's rows: no sixth), the exchanges;
# the session and its agent are the caller's), the reply stored (the session's count,
# which asks again whether its user may still reach it, and the INSERT).
TURN_STATEMENTS = 15


def statements(captured) -> list[str]:
    return [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"] not in ("BEGIN", "COMMIT") and not query["sql"].startswith("SAVEPOINT")
    ]


@pytest.fixture
def returning(alice, agent, transactional_db):
    """Alice's earlier session, with words her new question's recall finds."""
    earlier = Session.objects.start(user=alice, agent=agent)
    past_topic(earlier, title="Trip", lines=[KYOTO, "Lovely.", "And the rail pass?", "Seven days."])
    return earlier


def test_a_returning_users_turn_sends_a_bounded_number_of_statements(
    session, returning, fake_openai
):
    do_send_message(session=session, content="Which hotel did we book in Kyoto?")
    do_send_message(session=session, content="And how long is the Kyoto rail pass?")

    with CaptureQueriesContext(connection) as captured:
        result = do_send_message(session=session, content="Kyoto hotel once more?")

    sent = statements(captured)
    assert len(sent) <= TURN_STATEMENTS, "\n".join(sql[:120] for sql in sent)
    assert result.reply.topic_id == result.user_message.topic_id == session.active_topic().pk


def test_a_message_goes_to_the_topic_active_when_it_is_stored(session, alice, agent):
    first = session.active_topic()
    asked = session.append_message(role=Message.Role.USER, content="First subject")
    Topic.objects.filter(pk=first.pk).update(is_active=False)
    second = Topic.objects.create(session=session, origin=Topic.Origin.USER)

    answered = session.append_message(role=Message.Role.USER, content="Second subject")

    assert asked.topic_id == first.pk and answered.topic_id == second.pk
    assert Message.objects.get(pk=answered.pk).topic_id == second.pk
    assert answered.topic == second and answered.seq == asked.seq + 1


def test_storing_into_a_session_with_no_active_topic_says_so(session):
    Topic.objects.filter(session=session).update(is_active=False)

    with pytest.raises(Topic.DoesNotExist):
        session.append_message(role=Message.Role.USER, content="Lost?")

    assert not Message.objects.filter(session=session).exists()


def test_a_turn_whose_recall_by_meaning_finds_messages_stays_in_the_bound(
    session, returning, fake_openai, monkeypatch
):
    """Recall by meaning finds a past message (the stand-in encoder: the same words) and
    quotes it: its messages come with their ranking's rows, no statement more."""
    found = []

    def spied(**arguments):
        nearest = vector_messages(**arguments)
        found.append(nearest)
        return nearest

    monkeypatch.setattr(ranking, "vector_messages", spied)
    do_send_message(session=session, content="Which hotel did we book in Kyoto?")
    found.clear()

    with CaptureQueriesContext(connection) as captured:
        do_send_message(session=session, content="And the rail pass?")

    sent = statements(captured)
    assert len(sent) <= TURN_STATEMENTS, "\n".join(sql[:120] for sql in sent)
    (message, _), *_ = found[-1]
    assert message.content == "And the rail pass?" and message.topic.title == "Trip"
    assert message.session_id == returning.pk and message.session.created_at == returning.created_at
