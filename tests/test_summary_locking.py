"""No model call while a row lock is held (issue 10 part B).

The fake provider checks, from its own database connection and at the moment each
request arrives, that the session and topic rows of the caller are not locked
(``SELECT … FOR UPDATE NOWAIT``). Each scenario makes the summary prepared before the lock
stale (a message or a notes edit lands during the call), which is exactly when the old
code made a second call inside the lock.
"""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connections, transaction

from memory.actions.fork import ForkPlan, do_silent_fork
from memory.actions.topics import do_new_topic
from memory.models import Notes, Session, Topic
from tests.evaluation_helpers import SUBJECT_A, SUBJECT_B, converse, say, summary_answer

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class LockProbe:
    """Installed as the fake provider's ``on_request``: records, per request, which of the
    session's rows another connection could not lock, then runs the scenario's action."""

    def __init__(self, session: Session, action=None) -> None:
        self.session_id = session.pk
        self.action = action
        self.locked: list[list[str]] = []

    def __call__(self, body: dict) -> None:
        try:
            self.locked.append(self._locked_rows())
            if self.action is not None:
                self.action(len(self.locked))
        finally:
            connections.close_all()  # this server thread's connection only

    def _locked_rows(self) -> list[str]:
        found = []
        checks = [("session", Session.objects.filter(pk=self.session_id))]
        for topic_id in Topic.objects.filter(session_id=self.session_id).values_list(
            "pk", flat=True
        ):
            checks.append((f"topic {topic_id}", Topic.objects.filter(pk=topic_id)))
        for name, rows in checks:
            try:
                with transaction.atomic():
                    list(rows.select_for_update(nowait=True))
            except DatabaseError:
                found.append(name)
        return found


def test_a_new_topic_never_calls_the_model_under_the_lock_even_when_the_topic_grew(
    fake_openai, session
):
    converse(session, SUBJECT_A)
    prior = session.active_topic()

    def a_message_arrives_during_the_first_call(call: int) -> None:
        if call == 1:
            say(session, "user", "One more thing: marigolds?")

    probe = LockProbe(session, a_message_arrives_during_the_first_call)
    fake_openai.on_request = probe
    fake_openai.reply_json(summary_answer(title="Stale"))
    fake_openai.reply_json(summary_answer(title="Balcony garden with marigolds"))

    do_new_topic(session=session)

    assert probe.locked == [[], []]  # two calls, neither under a lock
    prior.refresh_from_db()
    assert (prior.title, prior.is_active, prior.summarized_through_seq) == (
        "Balcony garden with marigolds",
        False,
        7,
    )


def test_a_fork_never_calls_the_model_under_the_lock_even_when_the_notes_changed(
    fake_openai, session
):
    converse(session, SUBJECT_A + SUBJECT_B)
    prior = session.active_topic()

    def the_agent_writes_notes_during_the_first_call(call: int) -> None:
        if call == 1:
            Notes.objects.create(topic_id=prior.pk, content="Decision: 30 cm pots.")

    probe = LockProbe(session, the_agent_writes_notes_during_the_first_call)
    fake_openai.on_request = probe
    fake_openai.reply_json(summary_answer(title="Stale"))
    fake_openai.reply_json(summary_answer(title="Balcony garden, 30 cm pots"))

    fork = do_silent_fork(plan=ForkPlan(session.pk, prior.pk, start_seq=7, reason="test"))

    assert fork is not None
    assert probe.locked == [[], []]
    assert "Decision: 30 cm pots." in fake_openai.requests[1]["messages"][1]["content"]
    prior.refresh_from_db()
    assert prior.title == "Balcony garden, 30 cm pots"
    assert not prior.notes.filter(archived=False).exists()


def test_a_topic_that_keeps_changing_is_still_closed_with_what_was_prepared(fake_openai, session):
    """Every attempt goes stale: the last one uses its prepared summary rather than call
    the model under the lock."""
    converse(session, SUBJECT_A)
    prior = session.active_topic()
    probe = LockProbe(session, lambda call: say(session, "user", f"Detail {call}."))
    fake_openai.on_request = probe
    for attempt in range(3):
        fake_openai.reply_json(summary_answer(title=f"Attempt {attempt + 1}"))

    do_new_topic(session=session)

    assert probe.locked == [[], [], []]
    prior.refresh_from_db()
    assert prior.title == "Attempt 3" and not prior.is_active
    # It says what it covers: everything up to the message that landed during its call.
    assert prior.summarized_through_seq == 8


def test_a_message_store_goes_through_while_a_summary_call_is_in_flight(fake_openai, session):
    """The second call (the topic grew during the first) waits, inside the fake provider,
    for a message store of the same session: under a lock it would wait for ever."""
    converse(session, SUBJECT_A)
    second_call, stored = threading.Event(), threading.Event()
    store_went_through: list[bool] = []

    def scenario(call: int) -> None:
        if call == 1:
            say(session, "user", "One more thing: marigolds?")
        elif call == 2:
            second_call.set()
            # Shorter than the client's timeout (2 s), so the call itself still succeeds.
            store_went_through.append(stored.wait(1.0))

    fake_openai.on_request = LockProbe(session, scenario)
    for _ in range(3):
        fake_openai.reply_json(summary_answer(title="Balcony garden"))
    worker = threading.Thread(target=close_topic, args=(session,))
    worker.start()
    try:
        assert second_call.wait(WAIT)
        say(session, "user", "A message while the topic is being closed.")
        stored.set()
    finally:
        worker.join(3 * WAIT)
    assert store_went_through == [True]
    prior = session.topics.get(is_active=False)
    assert (prior.title, prior.summary_is_fallback) == ("Balcony garden", False)


WAIT = 5.0


def close_topic(session: Session) -> None:
    try:
        do_new_topic(session=session)
    finally:
        connections.close_all()  # this thread's connection only
