"""An evaluation and a turn writing to the same session at once must not deadlock.

Found by bench.chat_load: the tenth message of a session triggers an evaluation that
runs while the next turn stores its messages. A turn's store takes the session row, then
(at commit, through the message's foreign key) a share lock on the topic; the in-place
refresh holds the topic row, so it must not then wait for the session row.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction

from memory.actions import evaluation as pipeline
from memory.actions.evaluation import evaluate_session
from tests.evaluation_helpers import SUBJECT_A, MarkerDetector, converse, summary_answer

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT = 5.0


def test_a_refresh_and_a_message_stored_at_the_same_time_both_complete(
    session, fake_openai, monkeypatch
):
    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer(title="Balcony garden"))
    topic_held = threading.Event()
    session_held = threading.Event()
    apply_summary = pipeline.apply_summary

    def apply_then_let_the_turn_in(**kwargs):
        changed = apply_summary(**kwargs)
        topic_held.set()  # the refresh holds the topic row from here to its commit
        session_held.wait(WAIT)
        time.sleep(0.2)  # the turn is now waiting at its commit
        return changed

    monkeypatch.setattr(pipeline, "apply_summary", apply_then_let_the_turn_in)
    errors: list[BaseException] = []

    def evaluate():
        try:
            evaluate_session(session_id=session.pk, reason="test", detector=MarkerDetector())
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    def store_a_message():
        try:
            assert topic_held.wait(WAIT)
            with transaction.atomic():  # as a turn's store: session row first, commit later
                session.append_message(role="user", content="And the lettuce?")
                session_held.set()
        except BaseException as error:
            errors.append(error)
            session_held.set()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=evaluate), threading.Thread(target=store_a_message)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3 * WAIT)

    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    topic = session.active_topic()
    assert (topic.title, topic.evaluated_through_seq) == ("Balcony garden", 6)
    assert session.messages.filter(seq=7, content="And the lettuce?").exists()


@pytest.mark.postgres
def test_a_refresh_locks_the_session_row_before_the_topic_as_a_new_topic_does(fake_openai, session):
    """Two lock orders deadlocked (issue 20): a new topic takes the session row, then the
    topic's; the refresh took the topic's and then waited for the session's."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.actions.evaluation import evaluate_session
    from tests.evaluation_helpers import SUBJECT_A, MarkerDetector, converse, summary_answer

    converse(session, SUBJECT_A)
    fake_openai.reply_json(summary_answer())
    with CaptureQueriesContext(connection) as queries:
        outcome = evaluate_session(session_id=session.pk, reason="test", detector=MarkerDetector())
    assert outcome.action == "refreshed"
    locks = [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]]
    tables = [sql.split(" FROM ", 1)[1].split()[0].strip('"') for sql in locks]
    relevant = [table for table in tables if table in ("memory_session", "memory_topic")]
    assert relevant[:2] == ["memory_session", "memory_topic"], locks
